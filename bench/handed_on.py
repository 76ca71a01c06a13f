# One keep-alive client against authgated, one call at a time: 20,000 (or N) plain `token`
# calls on a connection that stays at the front door, then on one that asked `daemon.info` first
# and so was handed on to NIO (RPCConnectionHandler). Prints calls/s, p50 and p99 of each.
#   python3 bench/handed_on.py SOCKET [N]     (a signed-in session of provider "mock")
# docs/BENCHMARKS.md, "The NIO handler's cached path", has what it measured.
import socket, sys, time
path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20000
line = b'{"jsonrpc":"2.0","id":1,"method":"token","params":{"provider":"mock"}}\n'
def run(first):
    s = socket.socket(socket.AF_UNIX); s.connect(path); f = s.makefile("rb")
    if first:
        s.sendall(b'{"jsonrpc":"2.0","id":0,"method":"daemon.info"}\n'); f.readline()
    times = []
    for _ in range(n):
        t = time.perf_counter_ns(); s.sendall(line); answer = f.readline(); times.append(time.perf_counter_ns() - t)
        assert b'"access_token"' in answer, answer
    s.close(); times.sort()
    return "%7.0f calls/s  p50 %4d us  p99 %5d us" % (n / (sum(times) / 1e9), times[n // 2] // 1000, times[n * 99 // 100] // 1000)
print("front door:", run(False), "| handed on:", run(True))
