"""The Kubernetes manifests in deploy/kubernetes, checked without a cluster (docs/KUBERNETES.md).

    .venv/bin/python -m pytest -q Tests/deploy

Every YAML document is parsed, each provider file a ConfigMap holds is run through
docs/provider.schema.json, and what the containers say to each other is followed through the
volumes that connect them: the provider file reaches the daemon as its file-trust rules accept
it (a projected volume, whose root is a sticky tmpfs, in a subdirectory: a configMap volume's
root is 0777 and refused), the files it names are the ones mounted in the daemon's container,
the projected service-account token is the one the provider file sends,
the sink and the proxy talk to the socket the daemon listens on, the sink writes where the
application reads, the proxy listens on loopback where the application sends its requests, as a
uid it serves, and sends them on over https,
no caller administers the daemon (a socket on the node's hostPath needs --no-admin), the node's
socket directory is not the Debian package's /run/authgate (systemd/tmpfiles.d),
the probes ask the port the daemon serves its metrics on, and every flag given to authgated
and authgate is one their --help lists (the binaries from $AUTHGATE_BIN_DIR, else .build/debug;
only that check is skipped without them).

kubectl cannot check manifests without an API server, even with --dry-run=client (it asks the
server for its resource types first), so the objects are checked against the Kubernetes API's
own JSON schemas by kubernetes-validate, strictly (no unknown field), for 1.29 (the first
release with native sidecars on by default) and for the newest release it knows.
"""

import json
import os
import posixpath
import re
import subprocess
from functools import lru_cache
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))
SCHEMA = json.loads((ROOT / "docs" / "provider.schema.json").read_text())

# Provider-file keys that name a file the daemon reads.
PATH_KEYS = [
    "client_assertion_file", "assertion_file", "assertion_key_file", "subject_token_file",
    "client_secret_file", "client_key_file",
]
TLS_PATH_KEYS = ["ca_file", "client_cert_file", "client_key_file"]
# The provider-file keys that hold a platform token (the projected service-account token).
PLATFORM_TOKEN_KEYS = ["client_assertion_file", "assertion_file", "subject_token_file"]
# Audiences that make a token the Kubernetes API's own: never to be sent to a provider.
KUBERNETES_AUDIENCES = {"", "kubernetes", "https://kubernetes.default.svc", "https://kubernetes.default.svc.cluster.local"}
# The audience a provider's federation expects of the platform token, by the issuer's host.
AUDIENCE_BY_ISSUER_HOST = {"login.microsoftonline.com": "api://AzureADTokenExchange"}


def documents(path: Path) -> list[dict]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document is not None]


ALL = [(path, document) for path in MANIFESTS for document in documents(path)]
WORKLOADS = [(path, document) for path, document in ALL if document["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "Job")]


def config_maps(path: Path) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in documents(path) if d["kind"] == "ConfigMap"}


def pod_spec(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


def containers(pod: dict) -> list[dict]:
    return pod.get("initContainers", []) + pod.get("containers", [])


def volume(pod: dict, name: str) -> dict:
    matches = [v for v in pod.get("volumes", []) if v["name"] == name]
    assert len(matches) == 1, f"volume {name}: {len(matches)} definitions"
    return matches[0]


def command(container: dict) -> list[str]:
    return [str(word) for word in container.get("command", []) + container.get("args", [])]


def program(container: dict) -> str:
    words = command(container)
    return posixpath.basename(words[0]) if words else ""


def daemons(pod: dict) -> list[dict]:
    return [c for c in containers(pod) if program(c) == "authgated"]


def sinks(pod: dict) -> list[dict]:
    return [c for c in containers(pod) if program(c) == "authgate" and command(c)[1:2] == ["sink"]]


def proxies(pod: dict) -> list[dict]:
    return [c for c in containers(pod) if program(c) == "authgate" and command(c)[1:2] == ["proxy"]]


def options(container: dict, name: str) -> list[str]:
    """Every value of a repeatable `--name VALUE` (or `--name=VALUE`) in the container's command."""
    words = command(container)
    values = [words[i + 1] for i, word in enumerate(words[:-1]) if word == name]
    return values + [word.split("=", 1)[1] for word in words if word.startswith(name + "=")]


def option(container: dict, name: str) -> str | None:
    """The value of `--name VALUE` (or `--name=VALUE`) in the container's command."""
    words = command(container)
    for index, word in enumerate(words):
        if word == name and index + 1 < len(words):
            return words[index + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def mount_of(container: dict, path: str) -> tuple[dict, str] | None:
    """The mount holding `path` in the container (the deepest), and the path inside it."""
    best = None
    for mount in container.get("volumeMounts", []):
        base = mount["mountPath"].rstrip("/")
        if path == base or path.startswith(base + "/"):
            if best is None or len(base) > len(best[0]["mountPath"].rstrip("/")):
                best = (mount, path[len(base):].lstrip("/"))
    return best


def projected_files(path: Path, pod: dict, volume_name: str) -> dict[str, dict]:
    """The files a configMap, secret or projected volume puts in its directory, by relative
    path, each as {"source": ..., ...}."""
    definition = volume(pod, volume_name)
    sources = []
    if "projected" in definition:
        sources = definition["projected"]["sources"]
    elif "configMap" in definition:
        sources = [{"configMap": definition["configMap"]}]
    elif "secret" in definition:
        sources = [{"secret": {"name": definition["secret"]["secretName"], **definition["secret"]}}]
    files: dict[str, dict] = {}
    maps = config_maps(path)
    for source in sources:
        if "serviceAccountToken" in source:
            token = source["serviceAccountToken"]
            files[token["path"]] = {"source": "serviceAccountToken", **token}
        for kind in ("configMap", "secret"):
            if kind not in source:
                continue
            items = source[kind].get("items")
            if items is None and kind == "configMap":
                items = [{"key": key, "path": key} for key in maps[source[kind]["name"]]["data"]]
            for item in items or []:
                entry = {"source": kind, "name": source[kind]["name"], "key": item["key"]}
                if kind == "configMap":
                    entry["data"] = maps[source[kind]["name"]]["data"][item["key"]]
                files[item["path"]] = entry
    return files


def provider_files(path: Path, pod: dict, daemon: dict) -> dict[str, dict]:
    """The provider files the daemon reads from its --providers directory, by provider id."""
    directory = option(daemon, "--providers")
    assert directory, f"{daemon['name']}: no --providers"
    found = mount_of(daemon, directory)
    assert found, f"{daemon['name']}: nothing is mounted at --providers {directory}"
    mount, inside = found
    providers = {}
    for relative, entry in projected_files(path, pod, mount["name"]).items():
        if posixpath.dirname(relative) == inside and relative.endswith(".json") and "data" in entry:
            providers[posixpath.basename(relative)[: -len(".json")]] = json.loads(entry["data"])
    return providers


def files_named(document: dict) -> dict[str, str]:
    """Every file a provider document names, by its key."""
    named = {key: document[key] for key in PATH_KEYS if key in document}
    named.update({f"tls.{key}": document["tls"][key] for key in TLS_PATH_KEYS if key in document.get("tls", {})})
    return named


def daemon_pods():
    for path, workload in WORKLOADS:
        pod = pod_spec(workload)
        for daemon in daemons(pod):
            yield path, workload, pod, daemon


def sink_pods():
    for path, workload in WORKLOADS:
        pod = pod_spec(workload)
        for sink in sinks(pod):
            yield path, workload, pod, sink


def proxy_pods():
    for path, workload in WORKLOADS:
        pod = pod_spec(workload)
        for proxy in proxies(pod):
            yield path, workload, pod, proxy


def ids(items):
    return [f"{path.name}:{workload['metadata']['name']}:{container['name']}" for path, workload, _, container in items]


DAEMONS = list(daemon_pods())
SINKS = list(sink_pods())
PROXIES = list(proxy_pods())
# The daemon's clients in the manifests: each needs its socket and a provider that admits it.
CALLERS = SINKS + PROXIES


def test_every_document_parses():
    assert {path.name for path in MANIFESTS} >= {"sidecar.yaml", "daemonset.yaml", "proxy-sidecar.yaml"}
    for path, document in ALL:
        assert {"apiVersion", "kind", "metadata"} <= document.keys(), f"{path.name}: {document}"
        assert document["metadata"].get("name"), f"{path.name}: a {document['kind']} without a name"
    kinds = {path.name: {d["kind"] for d in documents(path)} for path in MANIFESTS}
    assert {"ConfigMap", "ServiceAccount", "Deployment"} <= kinds["sidecar.yaml"]
    assert {"ConfigMap", "ServiceAccount", "DaemonSet"} <= kinds["daemonset.yaml"]
    assert {"ConfigMap", "ServiceAccount", "Deployment"} <= kinds["proxy-sidecar.yaml"]
    assert len(DAEMONS) >= 3 and len(SINKS) >= 2 and len(PROXIES) >= 1


def test_provider_files_pass_the_schema():
    validator = jsonschema.Draft202012Validator(SCHEMA)
    checked = 0
    for path in MANIFESTS:
        for name, config_map in config_maps(path).items():
            for key, text in config_map.get("data", {}).items():
                if not key.endswith(".json"):
                    continue
                errors = [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}" for e in validator.iter_errors(json.loads(text))]
                assert not errors, f"{path.name}: ConfigMap {name}, {key}: {errors}"
                checked += 1
    assert checked >= 2


@pytest.mark.parametrize("path, workload, pod, daemon", DAEMONS, ids=ids(DAEMONS))
def test_the_provider_files_reach_the_daemon_as_it_trusts_them(path, workload, pod, daemon):
    providers = provider_files(path, pod, daemon)
    assert providers, "the --providers directory gets no provider file"
    for provider, document in providers.items():
        # What the sidecar and the node agent are for: a service's sign-in, with nothing on disk.
        assert document.get("storage", "memory") == "memory", f"{provider}: storage is written to a read-only root"
    mount, inside = mount_of(daemon, option(daemon, "--providers"))
    definition = volume(pod, mount["name"])
    # A configMap volume's root is 0777 on the node's disk: the daemon refuses a provider file
    # below a directory others may write (a projected volume's root is a sticky tmpfs).
    assert "projected" in definition, f"{mount['name']}: the provider file must come through a projected volume"
    # The providers directory itself must be writable by nobody else: not the volume's root.
    assert inside, f"--providers names the root of the volume {mount['name']}; put the files in a subdirectory"
    assert definition["projected"].get("defaultMode", 0o644) & 0o022 == 0
    assert mount.get("readOnly") is True


@pytest.mark.parametrize("path, workload, pod, daemon", DAEMONS, ids=ids(DAEMONS))
def test_every_file_a_provider_names_is_mounted_in_the_daemon(path, workload, pod, daemon):
    for provider, document in provider_files(path, pod, daemon).items():
        for key, file in files_named(document).items():
            found = mount_of(daemon, file)
            assert found, f"{provider}: {key} {file}: no volume is mounted there in {daemon['name']}"
            mount, inside = found
            files = projected_files(path, pod, mount["name"])
            assert inside in files, f"{provider}: {key} {file}: the volume {mount['name']} at {mount['mountPath']} holds {sorted(files)}"


@pytest.mark.parametrize("path, workload, pod, daemon", DAEMONS, ids=ids(DAEMONS))
def test_the_projected_token_is_the_one_the_provider_sends(path, workload, pod, daemon):
    account = pod.get("serviceAccountName")
    accounts = {d["metadata"]["name"] for d in documents(path) if d["kind"] == "ServiceAccount"}
    assert account in accounts, f"serviceAccountName {account} is not defined in {path.name}"
    sent = 0
    for provider, document in provider_files(path, pod, daemon).items():
        for key in PLATFORM_TOKEN_KEYS:
            if key not in document:
                continue
            mount, inside = mount_of(daemon, document[key])
            token = projected_files(path, pod, mount["name"])[inside]
            assert token["source"] == "serviceAccountToken", f"{provider}: {key} is not a projected service-account token"
            assert token.get("audience", "") not in KUBERNETES_AUDIENCES, f"{provider}: the token for the provider must have its own audience"
            host = re.sub(r"^https://([^/:]+).*", r"\1", document.get("issuer", ""))
            if host in AUDIENCE_BY_ISSUER_HOST:
                assert token["audience"] == AUDIENCE_BY_ISSUER_HOST[host], f"{provider}: {host} expects the audience {AUDIENCE_BY_ISSUER_HOST[host]}"
            # The API server's minimum; kubelet replaces the file before 80 % of it has passed.
            assert token.get("expirationSeconds", 3600) >= 600
            if key == "client_assertion_file":
                assert document.get("client_auth", "client_assertion_file") == "client_assertion_file"
                assert "client_credentials" in document["grants"]
            sent += 1
        # Only the daemon reads the platform token: no other container mounts its volume.
        for key in PLATFORM_TOKEN_KEYS:
            if key in document:
                name = mount_of(daemon, document[key])[0]["name"]
                readers = [c["name"] for c in containers(pod) if any(m["name"] == name for m in c.get("volumeMounts", []))]
                assert readers == [daemon["name"]], f"the platform token's volume {name} is mounted in {readers}"
    assert sent, "no provider of this daemon signs in with the projected token"


def daemon_for(sink_path: Path, sink_pod: dict, sink: dict):
    """The daemon the caller's (a sink's or a proxy's) --socket reaches: in its own pod through a
    shared volume, or on the node through the same hostPath. Returns (path, pod, daemon, the
    caller's socket volume)."""
    socket = option(sink, "--socket")
    assert socket, f"{sink['name']}: no --socket"
    mount, inside = mount_of(sink, posixpath.dirname(socket))
    sink_volume = volume(sink_pod, mount["name"])
    for path, _, pod, daemon in DAEMONS:
        listening = option(daemon, "--socket")
        if posixpath.basename(listening) != posixpath.basename(socket):
            continue
        found = mount_of(daemon, posixpath.dirname(listening))
        if not found or found[1] != inside:
            continue
        daemon_volume = volume(pod, found[0]["name"])
        if pod is sink_pod and daemon_volume is sink_volume:
            return path, pod, daemon, sink_volume
        if "hostPath" in sink_volume and "hostPath" in daemon_volume and sink_volume["hostPath"]["path"] == daemon_volume["hostPath"]["path"]:
            return path, pod, daemon, sink_volume
    return None


def groups_of(pod: dict, container: dict) -> set[int]:
    pod_context, context = pod.get("securityContext", {}), container.get("securityContext", {})
    groups = set(pod_context.get("supplementalGroups", []))
    for gid in (pod_context.get("fsGroup"), context.get("runAsGroup", pod_context.get("runAsGroup"))):
        if gid is not None:
            groups.add(gid)
    return groups


def uid_of(pod: dict, container: dict) -> int | None:
    return container.get("securityContext", {}).get("runAsUser", pod.get("securityContext", {}).get("runAsUser"))


@pytest.mark.parametrize("path, workload, pod, sink", CALLERS, ids=ids(CALLERS))
def test_the_caller_reaches_the_daemon_and_may_use_the_provider(path, workload, pod, sink):
    """A sink or a proxy: both ask the daemon for their own uid's session."""
    found = daemon_for(path, pod, sink)
    assert found, f"{sink['name']}: no daemon listens on --socket {option(sink, '--socket')} through the same volume"
    daemon_path, daemon_pod, daemon, socket_volume = found
    if daemon_pod is pod:
        assert "emptyDir" in socket_volume, "the pod's own socket lives and dies with the pod"
    else:
        assert socket_volume["hostPath"].get("type") == "Directory", "a caller must not create the node's socket directory"
    # The socket is 0660 with --socket-group: the caller needs that group.
    group = option(daemon, "--socket-group")
    assert group is not None and int(group) in groups_of(pod, sink), f"{sink['name']} is not in the socket's group {group}"
    assert int(group) in groups_of(daemon_pod, daemon), "the daemon can only give its socket to a group it is in"
    provider = command(sink)[2]
    providers = provider_files(daemon_path, daemon_pod, daemon)
    assert provider in providers, f"the daemon has no provider {provider}: {sorted(providers)}"
    users = providers[provider].get("access", {}).get("users")
    if users is not None:
        assert str(uid_of(pod, sink)) in users, f"{provider}'s access.users {users} does not admit {sink['name']}'s uid {uid_of(pod, sink)}"


def package_runtime_directories() -> set[str]:
    """The directories under /run that the Debian package's tmpfiles.d snippet makes its own
    (/run/authgate: the system daemon's socket directory)."""
    lines = (ROOT / "systemd" / "tmpfiles.d" / "authgate.conf").read_text().splitlines()
    fields = [line.split() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return {posixpath.normpath(f[1]) for f in fields if len(f) > 1 and f[1].startswith("/run/")}


def node_path(path: str) -> str:
    path = posixpath.normpath(path)
    # /var/run is a link to /run on every distribution with systemd.
    return "/run" + path[len("/var/run"):] if path == "/var/run" or path.startswith("/var/run/") else path


def test_the_node_socket_directory_is_not_the_packages():
    """A node with the Debian package installed has its own /run/authgate: tmpfiles.d gives it
    to the package's `authgate` user and its daemon listens on authgate.sock there. A hostPath
    in or around it would share that directory with the host's daemon."""
    package = package_runtime_directories()
    assert "/run/authgate" in package
    checked = 0
    for path, workload in WORKLOADS:
        for definition in pod_spec(workload).get("volumes", []):
            if "hostPath" not in definition:
                continue
            host = node_path(definition["hostPath"]["path"])
            for directory in package:
                where = f"{path.name}: {workload['metadata']['name']}, volume {definition['name']}: hostPath {host}"
                assert host != directory, f"{where} is the Debian package's runtime directory"
                assert not host.startswith(directory + "/"), f"{where} is inside the Debian package's {directory}"
                assert not directory.startswith(host.rstrip("/") + "/"), f"{where} holds the Debian package's {directory}"
            checked += 1
    assert checked >= 2, "the DaemonSet and its caller each mount the node's socket directory"


@pytest.mark.parametrize("path, workload, pod, daemon", DAEMONS, ids=ids(DAEMONS))
def test_no_caller_administers_the_daemon(path, workload, pod, daemon):
    """authgated takes root, its own uid and members of --admin-group for administrators
    (config.reload, provider.discover/register, status --all, ...) unless it runs --no-admin,
    which refuses those methods to everyone (docs/DAEMON.md)."""
    if "--no-admin" in command(daemon):
        return
    mount, _ = mount_of(daemon, posixpath.dirname(option(daemon, "--socket")))
    # Any pod on the node may mount a hostPath, as any uid (0 and 10001 are common image uids).
    assert "hostPath" not in volume(pod, mount["name"]), (
        f"{path.name}: {daemon['name']} serves the node's pods through a hostPath without --no-admin: a caller running as uid 0 or {uid_of(pod, daemon)} would administer it"
    )
    # A socket in the pod's own volume: its callers are the pod's containers, none of them root
    # or the daemon's uid (an admin is `kubectl exec` into the daemon's container).
    administrators = {0, uid_of(pod, daemon)}
    for container in containers(pod):
        if container is not daemon and any(m["name"] == mount["name"] for m in container.get("volumeMounts", [])):
            assert uid_of(pod, container) not in administrators, f"{path.name}: {container['name']} (uid {uid_of(pod, container)}) would administer {daemon['name']}"


@pytest.mark.parametrize("path, workload, pod, sink", SINKS, ids=ids(SINKS))
def test_the_token_file_is_where_the_application_reads_it(path, workload, pod, sink):
    file = option(sink, "--file")
    mount, inside = mount_of(sink, posixpath.dirname(file))
    assert not mount.get("readOnly"), "the sink writes there"
    # The sink refuses a directory others may change unless it is root's and sticky: a tmpfs.
    assert volume(pod, mount["name"]).get("emptyDir", {}).get("medium") == "Memory"
    readers = []
    for container in containers(pod):
        if container is sink:
            continue
        for other in container.get("volumeMounts", []):
            if other["name"] == mount["name"]:
                seen = posixpath.join(other["mountPath"], inside, posixpath.basename(file))
                assert other.get("readOnly") is True, f"{container['name']} needs only to read {seen}"
                assert any(seen in word for word in command(container)), f"{container['name']} mounts the token but does not read {seen}"
                assert uid_of(pod, container) == uid_of(pod, sink), "the sink's file is 0400, its own uid's"
                readers.append(container["name"])
    assert readers, f"no container reads {file}"


def listen_address(proxy: dict) -> tuple[str, int]:
    """The host (brackets removed) and port of a proxy's `--listen HOST:PORT`."""
    listen = option(proxy, "--listen")
    assert listen, f"{proxy['name']}: no --listen"
    assert not listen.startswith("unix:"), f"{proxy['name']}: --listen {listen}: these examples serve the application on TCP loopback"
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


@pytest.mark.parametrize("path, workload, pod, proxy", PROXIES, ids=ids(PROXIES))
def test_the_proxy_serves_the_application_on_loopback(path, workload, pod, proxy):
    """The containers of a pod share its network: the proxy listens on the pod's loopback, which
    nothing outside the pod reaches, and serves the connections whose socket its own uid or an
    --allow-uid one owns (the kernel's /proc/net/tcp); the application sends its requests there
    as such a uid, and holds neither the token nor the daemon's socket."""
    host, port = listen_address(proxy)
    assert host in ("127.0.0.1", "::1"), f"--listen {host}: other pods and machines could use the session"
    assert "--allow-remote-callers" not in command(proxy)
    # https, or plain http to loopback only: the proxy refuses anything else at start.
    upstream = option(proxy, "--upstream")
    assert upstream and (upstream.startswith("https://") or re.match(r"http://(127\.0\.0\.1|\[::1\])[:/]", upstream)), f"--upstream {upstream}"
    allowed = options(proxy, "--allow-uid")
    assert all(value.isdigit() for value in allowed), f"--allow-uid {allowed}: numeric uids (the image's /etc/passwd knows no pod's user)"
    served = {uid_of(pod, proxy)} | {int(value) for value in allowed}
    base = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    socket_volume = mount_of(proxy, posixpath.dirname(option(proxy, "--socket")))[0]["name"]
    clients = []
    for container in containers(pod):
        if container is proxy or not any(word == base or word.startswith(base + "/") or base + "/" in word for word in command(container)):
            continue
        assert uid_of(pod, container) in served, f"{container['name']} (uid {uid_of(pod, container)}) would be refused: the proxy serves the uids {sorted(served)}"
        assert uid_of(pod, container) != 0
        assert not any(m["name"] == socket_volume for m in container.get("volumeMounts", [])), f"{container['name']} needs the proxy, not the daemon's socket"
        clients.append(container["name"])
    assert clients, f"no container sends its requests to {base}"
    # kubelet's own probes knock on the pod's IP, where nothing listens: the startup probe
    # connects to the loopback port from inside the container.
    probe = " ".join(proxy.get("startupProbe", {}).get("exec", {}).get("command", []))
    assert f"{host}/{port}" in probe or f"{host}:{port}" in probe, f"the startup probe ({probe or 'none'}) does not try {host}:{port}"


@pytest.mark.parametrize("path, workload, pod, daemon", DAEMONS, ids=ids(DAEMONS))
def test_the_probes_ask_the_metrics_listener(path, workload, pod, daemon):
    listen = option(daemon, "--metrics-listen")
    assert listen, "no --metrics-listen: no /healthz or /readyz"
    host, _, port = listen.rpartition(":")
    # kubelet probes the pod's IP: a bare PORT or a loopback address would never answer it.
    assert host and host.strip("[]") not in ("127.0.0.1", "::1", "localhost"), f"--metrics-listen {listen} serves loopback only"
    ports = {p.get("name"): p["containerPort"] for p in daemon.get("ports", [])}
    expected = {"livenessProbe": "/healthz", "readinessProbe": "/readyz", "startupProbe": "/readyz"}
    for probe, wanted in expected.items():
        http = daemon.get(probe, {}).get("httpGet")
        assert http, f"no {probe}"
        assert http["path"] == wanted, f"{probe} asks {http['path']}"
        assert "host" not in http
        number = ports.get(http["port"], http["port"])
        assert number == int(port), f"{probe} asks port {http['port']} ({number}); the daemon listens on {port}"


def test_every_container_is_locked_down():
    for path, workload in WORKLOADS:
        pod = pod_spec(workload)
        pod_context = pod.get("securityContext", {})
        assert pod_context.get("seccompProfile", {}).get("type") == "RuntimeDefault"
        for container in containers(pod):
            where = f"{path.name}: {workload['metadata']['name']}/{container['name']}"
            context = container.get("securityContext", {})
            assert context.get("readOnlyRootFilesystem") is True, where
            assert context.get("allowPrivilegeEscalation") is False, where
            assert context.get("capabilities", {}).get("drop") == ["ALL"], where
            if uid_of(pod, container) == 0:
                # Only the DaemonSet's step that hands the hostPath directory to the daemon.
                assert workload["kind"] == "DaemonSet" and container in pod.get("initContainers", []), where
                assert context["capabilities"].get("add") == ["CHOWN"], where
            else:
                assert context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is True, where
                assert uid_of(pod, container), f"{where}: no runAsUser (the session and the file are per uid)"
                assert not context.get("capabilities", {}).get("add"), where


@pytest.mark.parametrize("path, workload, pod, daemon", DAEMONS, ids=ids(DAEMONS))
def test_the_daemon_has_resources(path, workload, pod, daemon):
    resources = daemon.get("resources", {})
    assert {"cpu", "memory"} <= resources.get("requests", {}).keys()
    assert "memory" in resources.get("limits", {})


def test_the_daemon_and_its_callers_start_before_the_application():
    for path, workload in WORKLOADS:
        pod = pod_spec(workload)
        order = [c["name"] for c in pod.get("initContainers", [])]
        for container in daemons(pod) + sinks(pod) + proxies(pod):
            where = f"{path.name}: {workload['metadata']['name']}/{container['name']}"
            if workload["kind"] == "DaemonSet":
                continue  # the node's daemon is the pod's main container
            # Native sidecars (Kubernetes 1.29): running before the application, stopped after it.
            assert container["name"] in order and container.get("restartPolicy") == "Always", where
            # The next container starts once this one's startup probe passes.
            assert "startupProbe" in container, where
        if daemons(pod) and workload["kind"] != "DaemonSet":
            for caller in sinks(pod) + proxies(pod):
                assert order.index(daemons(pod)[0]["name"]) < order.index(caller["name"]), f"the daemon starts before {caller['name']}"


def help_text(binary_dir: Path, words: list[str]) -> str:
    program_name = words[0]
    arguments = ["--help"] if program_name == "authgated" else [words[1], "--help"]
    result = subprocess.run([str(binary_dir / program_name), *arguments], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


@lru_cache(maxsize=None)
def options_in_help(binary_dir: str, key: tuple[str, ...]) -> dict[str, bool]:
    """The options a --help lists, each with whether it takes a value."""
    text = help_text(Path(binary_dir), list(key))
    return {m.group(1): m.group(2) is not None for m in re.finditer(r"^\s+(?:-\w, )?(--[a-z0-9-]+)( <[^>]+>)?", text, re.M)}


def test_every_flag_is_one_the_binaries_know():
    binary_dir = Path(os.environ.get("AUTHGATE_BIN_DIR") or ROOT / ".build" / "debug")
    if not all((binary_dir / name).is_file() for name in ("authgated", "authgate")):
        pytest.skip(f"no authgated and authgate in {binary_dir}")
    checked = 0
    for path, workload in WORKLOADS:
        for container in containers(pod_spec(workload)):
            words = command(container)
            name = program(container)
            if name not in ("authgated", "authgate"):
                continue
            words[0] = name
            key = ("authgated",) if name == "authgated" else ("authgate", words[1])
            known = options_in_help(str(binary_dir), key)
            rest = words[1:] if name == "authgated" else words[2:]
            index = 0
            while index < len(rest):
                word = rest[index]
                if word.startswith("--"):
                    flag = word.split("=", 1)[0]
                    assert flag in known, f"{path.name}: {container['name']}: {' '.join(key)} has no {flag}"
                    if known[flag] and "=" not in word:
                        index += 1
                    checked += 1
                index += 1
    assert checked >= 10


@pytest.mark.parametrize("version", ["1.29.0", "latest"])
def test_the_objects_are_valid_kubernetes(version):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    wanted = kubernetes_validate.latest_version() if version == "latest" else version
    for path, document in ALL:
        try:
            kubernetes_validate.validate(document, wanted, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{path.name}: {document['kind']}/{document['metadata']['name']} (Kubernetes {wanted}): {error.message} at {'.'.join(map(str, error.path))}")
