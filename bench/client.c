/*
 * client.c - the least a program can do to get a token from authgated: what `authgate token
 * PROVIDER` does, with nothing else.
 *
 * Usage: client PROVIDER            (the socket: $AUTHGATE_SOCKET)
 *
 * Connects to the Unix socket, writes one `token` request line, reads the answer line and
 * prints the access token's value (the JSON string after "access_token":, not unescaped: a
 * token is a b64token). Exit 0 with the token, 1 otherwise. Linked statically, so it pays no
 * dynamic loader: the floor a whole-process `authgate token` is measured against
 * (authgate-bench --only cli).
 *
 * Build: cc -O2 -Wall -Wextra -std=gnu11 -static -o client client.c
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *path = getenv("AUTHGATE_SOCKET");
    if (argc != 2 || path == NULL || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) return 2;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strcpy(address.sun_path, path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) return 1;
    char request[512];
    int length = snprintf(request, sizeof request, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"token\",\"params\":{\"provider\":\"%s\"}}\n", argv[1]);
    if (length <= 0 || (size_t)length >= sizeof request || write(fd, request, (size_t)length) != length) return 1;
    static char answer[65536];
    size_t used = 0;
    while (used < sizeof answer - 1) {
        ssize_t count = read(fd, answer + used, sizeof answer - 1 - used);
        if (count <= 0) break;
        used += (size_t)count;
        if (memchr(answer + used - (size_t)count, '\n', (size_t)count)) break;
    }
    answer[used] = 0;
    char *token = strstr(answer, "\"access_token\":\"");
    if (token == NULL) return 1;
    token += strlen("\"access_token\":\"");
    char *end = strchr(token, '"');
    if (end == NULL) return 1;
    *end = '\n';
    return write(1, token, (size_t)(end - token + 1)) == end - token + 1 ? 0 : 1;
}
