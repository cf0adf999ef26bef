"""A Kubernetes API double served over HTTP to the real `kubernetes` client (test code).

What it does as kube-apiserver does (each visible in shared/fixtures/real-apiserver/):
discovery for its groups; create/get/list/update/patch/delete; paged lists served from one
snapshot (every page at the first page's resourceVersion; an expired continue token is 410);
a global resourceVersion with
409 Conflict on a stale update (a merge patch carrying metadata.resourceVersion is a
precondition too); generateName; label selectors; the status subresource (status dropped on
create and ignored on main-resource writes, spec ignored on /status); JSON merge patch, JSON
patch (failures give the generic 422) and strategic merge patch; 415 for PATCH with
application/json; watch streams with bookmarks, a watch error as an HTTP 200 stream with one
ERROR event (410 Expired when the resourceVersion is older than the history kept);
ownerReference garbage collection (asynchronous, as the garbage collector is); CRDs that
start serving their resources when created, with schema defaults, validation and printer
columns in Tables; and mutating/validating webhook calls over HTTPS to the real webhook, for every kind its
rules select (Jobs, JobSets and Kueue's own kinds alike).
The Job controller stand-in lives in jobs.py.

Where it differs from kube-apiserver: plain HTTP without authentication (a bearer token only
names the user the webhooks see); no managedFields, server-side apply, fieldSelectors beyond
metadata.name/metadata.namespace, or deletecollection; a list has no remainingItemCount, and
its continue token names the last key handed out rather than an etcd key; strategic merge patch merges maps and
replaces lists except `containers` and `webhooks` (merged by name), which covers the fields
Tower patches;
CRD conversion between v1beta1 and v1beta2 uses the webhook package's converter in-process
instead of calling /convert; CEL rules are not evaluated; no admission plugins (so no
ServiceAccount or LimitRange defaulting); Job defaulting covers the fields Tower reads.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import copy
import json
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jsonpatch

from tests.apidouble import reviews
from tests.apidouble import schema as schemas
from tests.apidouble.admission import AdmissionError, admit
from tests.apidouble.store import Kind, Obj, Store, Watcher, now_rfc3339

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
ADMIN = {
    "username": "kubernetes-admin",
    "groups": ["kubeadm:cluster-admins", "system:authenticated"],
}
TABLE = "as=Table"

BUILTIN = [
    Kind("", ["v1"], "namespaces", "Namespace", False, True, ["ns"], "namespace"),
    Kind("", ["v1"], "events", "Event", True, False, ["ev"], "event", spec_is_generation=False),
    Kind("", ["v1"], "pods", "Pod", True, True, ["po"], "pod", ["all"]),
    Kind(
        "",
        ["v1"],
        "nodes",
        "Node",
        False,
        True,
        ["no"],
        "node",
        spec_is_generation=False,
        status_on_create=True,
    ),
    Kind("", ["v1"], "secrets", "Secret", True, False, [], "secret", spec_is_generation=False),
    # Stored as sent, nothing more (enough for kubectl apply -k deploy/default):
    Kind("", ["v1"], "serviceaccounts", "ServiceAccount", True, False, ["sa"], "serviceaccount"),
    Kind("", ["v1"], "configmaps", "ConfigMap", True, False, ["cm"], "configmap"),
    # PodTemplates are stored as sent (what Tower's ProvisioningRequest controller makes).
    Kind("", ["v1"], "podtemplates", "PodTemplate", True, False, [], "podtemplate"),
    Kind("", ["v1"], "services", "Service", True, True, ["svc"], "service"),
    Kind("apps", ["v1"], "deployments", "Deployment", True, True, ["deploy"], "deployment"),
    Kind("apps", ["v1"], "statefulsets", "StatefulSet", True, True, ["sts"], "statefulset"),
    Kind("batch", ["v1"], "cronjobs", "CronJob", True, True, ["cj"], "cronjob"),
    Kind("policy", ["v1"], "poddisruptionbudgets", "PodDisruptionBudget", True, True, ["pdb"]),
    *(
        Kind("rbac.authorization.k8s.io", ["v1"], plural, kind, namespaced, False)
        for plural, kind, namespaced in (
            ("roles", "Role", True),
            ("rolebindings", "RoleBinding", True),
            ("clusterroles", "ClusterRole", False),
            ("clusterrolebindings", "ClusterRoleBinding", False),
        )
    ),
    Kind("batch", ["v1"], "jobs", "Job", True, True, [], "job", ["all"]),
    Kind(
        "scheduling.k8s.io",
        ["v1"],
        "priorityclasses",
        "PriorityClass",
        False,
        False,
        ["pc"],
        "priorityclass",
        spec_is_generation=False,
    ),
    Kind("coordination.k8s.io", ["v1"], "leases", "Lease", True, False, [], "lease"),
    Kind(
        "admissionregistration.k8s.io",
        ["v1"],
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
        False,
        [],
        "mutatingwebhookconfiguration",
        spec_is_generation=False,
    ),
    Kind(
        "admissionregistration.k8s.io",
        ["v1"],
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
        False,
        [],
        "validatingwebhookconfiguration",
        spec_is_generation=False,
    ),
    Kind(
        "apiextensions.k8s.io",
        ["v1"],
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        True,
        ["crd", "crds"],
        "customresourcedefinition",
    ),
]


def _job_status(job: Obj) -> str:
    """The STATUS column kube-apiserver's Job printer shows."""
    conditions = {
        c.get("type")
        for c in (job.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    }
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    for condition in ("Complete", "Failed", "Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if condition in conditions:
            return condition
    return "Running"


def _job_duration(job: Obj) -> str:
    status = job.get("status") or {}
    if not status.get("startTime"):
        return ""
    start = datetime.fromisoformat(status["startTime"].replace("Z", "+00:00")).timestamp()
    end = (
        datetime.fromisoformat(status["completionTime"].replace("Z", "+00:00")).timestamp()
        if status.get("completionTime")
        else time.time()
    )
    return _since(max(0, int(end - start)))


def _pod_spec(job: Obj) -> Obj:
    return ((job.get("spec") or {}).get("template") or {}).get("spec") or {}


# The columns kubectl shows for Jobs (a built-in printer in kube-apiserver; see the fixture
# api/crd-status-and-table/15-table-list-jobs-builtin.json).
JOB_COLUMNS: list[Obj] = [
    {"name": "Status", "type": "string", "compute": _job_status},
    {
        "name": "Completions",
        "type": "string",
        "compute": lambda j: (
            f"{(j.get('status') or {}).get('succeeded') or 0}/"
            f"{(j.get('spec') or {}).get('completions') or 1}"
        ),
    },
    {"name": "Duration", "type": "string", "compute": _job_duration},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {
        "name": "Containers",
        "type": "string",
        "priority": 1,
        "compute": lambda j: ",".join(
            c.get("name", "") for c in _pod_spec(j).get("containers") or []
        ),
    },
    {
        "name": "Images",
        "type": "string",
        "priority": 1,
        "compute": lambda j: ",".join(
            c.get("image", "") for c in _pod_spec(j).get("containers") or []
        ),
    },
    {
        "name": "Selector",
        "type": "string",
        "priority": 1,
        "compute": lambda j: ",".join(
            f"{k}={v}"
            for k, v in (
                ((j.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            ).items()
        ),
    },
]

next(k for k in BUILTIN if k.plural == "jobs").columns["v1"] = JOB_COLUMNS


CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


def _write_continue(rv: int, last: tuple[str, str]) -> str:
    """A continue token as kube-apiserver's: base64 JSON of the snapshot's version and where
    the next page starts (here the last key handed out, not an etcd key)."""
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(last)})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _read_continue(token: str | None) -> tuple[int, tuple[str, str]] | None:
    if not token:
        return None
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        namespace, name = raw["start"]
        return int(raw["rv"]), (str(namespace), str(name))
    except (ValueError, KeyError, TypeError) as err:
        raise ApiError(400, "BadRequest", "continue key is not valid: " + str(err)) from None


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Obj | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details
        self.retry_after = retry_after

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def not_found(kind: Kind, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(kind)} "{name}" not found',
        {"name": name, "group": kind.group, "kind": kind.plural}
        if kind.group
        else {"name": name, "kind": kind.plural},
    )


def _qualified(kind: Kind) -> str:
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def conflict(kind: Kind, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(kind)} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        {"name": name, "group": kind.group, "kind": kind.plural},
    )


def invalid(kind: Kind, name: str, causes: list[str]) -> ApiError:
    group = f".{kind.group}" if kind.group else ""
    what = f'{kind.kind}{group} "{name}" is invalid: '
    text = causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
    return ApiError(
        422, "Invalid", what + text, {"name": name, "group": kind.group, "kind": kind.kind}
    )


# ----- label selectors in query strings ---------------------------------------------------

_SET = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")


def parse_selector(text: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """`a=b,c!=d,e in (x,y),f,!g` → requirements (key, op, values)."""
    out: list[tuple[str, str, tuple[str, ...]]] = []
    for part in re.split(r",(?![^()]*\))", text):
        part = part.strip()
        if not part:
            continue
        if "!=" in part:
            key, value = part.split("!=", 1)
            out.append((key.strip(), "NotIn", (value.strip(),)))
        elif "==" in part or ("=" in part and " in " not in part):
            key, value = re.split(r"==?", part, maxsplit=1)
            out.append((key.strip(), "In", (value.strip(),)))
        else:
            match = _SET.match(part)
            if not match:
                raise ApiError(400, "BadRequest", f"unable to parse requirement: {part}")
            negate, key, op, values = match.groups()
            if op:
                vals = tuple(v.strip() for v in values.split(",") if v.strip())
                out.append((key, "In" if op == "in" else "NotIn", vals))
            else:
                out.append((key, "DoesNotExist" if negate else "Exists", ()))
    return out


def selects(requirements: list[tuple[str, str, tuple[str, ...]]], labels: dict[str, str]) -> bool:
    for key, op, values in requirements:
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


# ----- patches ----------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Merge maps; merge `containers`, `initContainers` and `webhooks` lists by name (their
    patchMergeKey); replace other lists."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif key in ("containers", "initContainers", "webhooks") and isinstance(value, list):
            merged = {c.get("name"): c for c in result.get(key) or []}
            order = [c.get("name") for c in result.get(key) or []]
            for item in value:
                name = item.get("name")
                if name not in merged:
                    order.append(name)
                merged[name] = strategic_merge_patch(merged.get(name), item)
            result[key] = [merged[n] for n in order]
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


# ----- JSONPath for printer columns ---------------------------------------------------------


def json_path(obj: Any, path: str) -> Any:
    """The subset of JSONPath printer columns use: `.a.b`, `.a[?(@.k=='v')].b`."""
    current: list[Any] = [obj]
    for token in re.findall(r"\.[A-Za-z0-9_]+|\[\?\(@\.[A-Za-z]+==['\"][^'\"]*['\"]\)\]", path):
        nxt: list[Any] = []
        if token.startswith("."):
            for item in current:
                if isinstance(item, dict) and token[1:] in item:
                    nxt.append(item[token[1:]])
        else:
            key, value = re.match(r"\[\?\(@\.([A-Za-z]+)==['\"]([^'\"]*)['\"]\)\]", token).groups()
            for item in current:
                for element in item if isinstance(item, list) else []:
                    if isinstance(element, dict) and element.get(key) == value:
                        nxt.append(element)
        current = nxt
    return current[0] if current else None


@dataclass
class Fault:
    """Fail matching requests: `times` of them (-1: every one), with `probability` each.

    `action` says how:
    - "status": answer `code` with a real-looking Status (and `retry_after`, as a header);
    - "reset": close the connection without reading further or answering (never processed);
    - "commit-reset": process the request, then close the connection instead of answering
      (the write happened, the client cannot know: an ambiguous write);
    - "delay": wait `delay` seconds, then process and answer (past a client's timeout, the
      client gives up while the server still commits).
    `method` and `plural` may be "*" (and `method` "WRITE": any but GET); `user` limits the
    fault to one user's requests.
    """

    method: str
    plural: str
    subresource: str = ""
    code: int = 409
    times: int = 1
    first_attempt_only: bool = False  # fail the first request for each object, once
    action: str = "status"
    probability: float = 1.0
    delay: float = 0.0
    retry_after: int | None = None
    user: str | None = None
    hits: int = 0


class ApiDouble:
    """The server. `start()` returns its URL; `kubeconfig()` writes a kubeconfig for it."""

    def __init__(
        self,
        *,
        bookmark_interval: float = 60.0,
        gc_delay: float = 0.05,
        history: int = 50_000,
    ) -> None:
        self.store = Store(history)
        for kind in BUILTIN:
            self.store.register(copy.deepcopy(kind))
        self.bookmark_interval = bookmark_interval
        self.gc_delay = gc_delay
        # Seconds every write takes before it is processed (0: as fast as Python goes). A
        # real kube-apiserver v1.32 on this machine answers a write in about 4-5 ms (p50,
        # one at a time; bench/burst.py --measure-latency measures it).
        self.write_latency = 0.0
        self.users: dict[str, Obj] = {}
        self.faults: list[Fault] = []
        self._faulted: set[tuple[str, str, str]] = set()
        self.requests: list[tuple[str, str, str]] = []  # (method, path, user)
        self.calls: list[tuple[str, str, dict[str, str], str]] = []  # ... with the query
        self.lists: list[tuple[str, str]] = []  # (user, plural) of each list (not watch)
        # Writes that changed something: (monotonic time, token, method, path, HTTP status).
        self.writes: list[tuple[float, str, str, str, int]] = []
        # Every write's (arrived, answered, token, method, path): which were in flight at once.
        self.write_spans: list[tuple[float, float, str, str, str]] = []
        self.hooks: list[Callable[[str, Kind, Obj], None]] = []  # after each commit
        # Paths a test serves itself (an aggregated API, say): each route is given (method,
        # path, query, username) and answers (HTTP status, JSON body), or None to pass.
        self.routes: list[Callable[[str, str, dict[str, str], str], tuple[int, Any] | None]] = []
        # RBAC, enforced only for the users named here: username -> ClusterRole-style rules
        # (a rule may carry "namespaces": [...] to act as a namespaced Role).
        self.rbac: dict[str, list[Obj]] = {}
        self.hung: set[str] = set()  # tokens whose requests and watches get no answer
        self._server: ThreadingHTTPServer | None = None
        self._port = 0
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self._closing = threading.Event()
        self._rng = random.Random(11)
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self._create_now("namespaces", {"metadata": {"name": name}})

    # ----- lifecycle ---------------------------------------------------------------------

    def start(self) -> str:
        double = self

        class Handler(_Handler):
            api = double

        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self._server.daemon_threads = True
        self._port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True, name="api-double").start()
        return self.url

    def restart(self, downtime: float = 0.5) -> None:
        """As kube-apiserver restarting: every open connection (watches included) is
        dropped, new ones are refused for `downtime` seconds, and the watch cache starts
        empty, so a watch from an older resourceVersion gets 410 Expired."""
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
        self.drop_connections()
        for key in list(self.store.kinds):
            self.store.expire_history(key, keep_current=True)
        time.sleep(downtime)
        self.start()

    def drop_connections(self) -> None:
        """Reset every open client connection (as a dying server or a proxy would)."""
        with self._connections_lock:
            doomed = list(self._connections)
        for conn in doomed:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    @property
    def url(self) -> str:
        assert self._port
        return f"http://127.0.0.1:{self._port}"

    def stop(self) -> None:
        self._closing.set()
        with self.store.lock:
            for watchers in self.store.watchers.values():
                for watcher in watchers:
                    watcher.events.put(None)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def kubeconfig(self, path: str, token: str = "admin", username: str | None = None) -> str:
        if username is not None:
            self.users[token] = {"username": username, "groups": ["system:authenticated"]}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "double", "cluster": {"server": self.url}}],
            "users": [{"name": token, "user": {"token": token}}],
            "contexts": [{"name": "double", "context": {"cluster": "double", "user": token}}],
            "current-context": "double",
        }
        with open(path, "w") as out:
            json.dump(config, out)
        return path

    # ----- direct access for tests (no HTTP) --------------------------------------------

    def kind(self, plural: str, group: str | None = None) -> Kind:
        for kind in self.store.kinds.values():
            if kind.plural == plural and (group is None or kind.group == group):
                return kind
        raise KeyError(plural)

    def get(self, plural: str, name: str, namespace: str = "") -> Obj | None:
        with self.store.lock:
            obj = self.store.get(self.kind(plural), namespace, name)
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, plural: str, namespace: str | None = None) -> list[Obj]:
        with self.store.lock:
            kind = self.kind(plural)
            return [
                copy.deepcopy(o)
                for (ns, _), o in sorted(self.store.objects[kind.key].items())
                if namespace is None or ns == namespace
            ]

    def _create_now(self, plural: str, obj: Obj) -> Obj:
        kind = self.kind(plural)
        obj = copy.deepcopy(obj)
        obj.setdefault("apiVersion", kind.api_version(kind.storage))
        obj.setdefault("kind", kind.kind)
        with self.store.lock:
            return self.store.commit(kind, "ADDED", obj)

    def update_status(
        self, plural: str, namespace: str, name: str, change: Callable[[Obj], None]
    ) -> Obj | None:
        """Change an object's status as a controller would (one commit)."""
        with self.store.lock:
            kind = self.kind(plural)
            current = self.store.get(kind, namespace, name)
            if current is None:
                return None
            updated = copy.deepcopy(current)
            change(updated.setdefault("status", {}))
            return self._commit(kind, "MODIFIED", updated)

    def _commit(self, kind: Kind, event: str, obj: Obj) -> Obj:
        stored = self.store.commit(kind, event, obj)
        for hook in self.hooks:
            hook(event, kind, stored)
        return stored

    def expire_watches(self, plural: str) -> None:
        """Drop watch history and end open watches: watches from older RVs now get 410."""
        self.store.expire_history(self.kind(plural).key)

    # ----- the API -------------------------------------------------------------------------

    def user_for(self, token: str | None) -> Obj:
        return copy.deepcopy(self.users.get(token or "", ADMIN))

    def _matching_fault(
        self, method: str, kind: Kind, sub: str, name: str, user: str, actions: tuple[str, ...]
    ) -> Fault | None:
        """The first fault that fires for this request (and count it)."""
        for fault in self.faults:
            if fault.action not in actions:
                continue
            writes = fault.method == "WRITE" and method != "GET"
            if fault.method not in ("*", method) and not writes:
                continue
            if fault.plural not in ("*", kind.plural):
                continue
            if fault.subresource != sub and not (fault.plural == "*" and fault.subresource == ""):
                continue
            if fault.user is not None and fault.user != user:
                continue
            if fault.first_attempt_only:
                ident = (method, f"{kind.key}/{name}", sub)
                if ident in self._faulted:
                    continue
                self._faulted.add(ident)
            elif fault.times == 0:
                continue
            if fault.probability < 1.0 and self._rng.random() >= fault.probability:
                continue
            if fault.times > 0 and not fault.first_attempt_only:
                fault.times -= 1
            fault.hits += 1
            return fault
        return None

    def _fault(self, method: str, kind: Kind, sub: str, name: str, user: str = "") -> None:
        fault = self._matching_fault(method, kind, sub, name, user, ("status",))
        if fault is None:
            return
        if fault.code == 409:
            raise conflict(kind, name)
        reasons = {429: "TooManyRequests", 503: "ServiceUnavailable", 504: "Timeout"}
        raise ApiError(
            fault.code,
            reasons.get(fault.code, "InternalError"),
            f"injected fault on {kind.plural}",
            retry_after=fault.retry_after,
        )

    def transport_fault(self, method: str, kind: Kind, sub: str, user: str) -> Fault | None:
        """A fault that acts on the connection rather than the answer (see Fault)."""
        return self._matching_fault(method, kind, sub, "", user, ("reset", "commit-reset", "delay"))

    # ----- RBAC, for the users it is given ------------------------------------------------

    def permits(self, username: str, group: str, resource: str, verb: str, ns: str | None) -> bool:
        rules = self.rbac.get(username)
        if rules is None:
            return True
        for rule in rules:
            namespaces = rule.get("namespaces")
            if namespaces is not None and ns not in namespaces:
                continue
            if (
                group in rule.get("apiGroups", ())
                and (resource in rule["resources"] or "*" in rule["resources"])
                and (verb in rule["verbs"] or "*" in rule["verbs"])
            ):
                return True
        return False

    def permits_path(self, username: str, path: str, verb: str) -> bool:
        """RBAC's nonResourceURLs: the path itself, or a prefix ending in `*`."""
        rules = self.rbac.get(username)
        if rules is None:
            return True
        for rule in rules:
            if verb not in rule.get("verbs", ()) and "*" not in rule.get("verbs", ()):
                continue
            for url in rule.get("nonResourceURLs", ()):
                if url == path or (url.endswith("*") and path.startswith(url[:-1])):
                    return True
        return False

    def _check_namespace(self, kind: Kind, namespace: str) -> None:
        if kind.namespaced and self.store.get(self.kind("namespaces"), "", namespace) is None:
            raise ApiError(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                {"name": namespace, "kind": "namespaces"},
            )

    def _check_not_terminating(self, kind: Kind, namespace: str, name: str) -> None:
        """kube-apiserver's NamespaceLifecycle admission: no new content in a namespace being
        deleted (tests/data/namespace-terminating/). The double keeps a deleted namespace only
        while a finalizer holds it (it has no namespace controller emptying it)."""
        ns_obj = self.store.get(self.kind("namespaces"), "", namespace)
        if ns_obj is None or not ns_obj["metadata"].get("deletionTimestamp"):
            return
        details: Obj = {"name": name, "kind": kind.plural}
        if kind.group:
            details = {"name": name, "group": kind.group, "kind": kind.plural}
        details["causes"] = [
            {
                "reason": "NamespaceTerminating",
                "message": f"namespace {namespace} is being terminated",
                "field": "metadata.namespace",
            }
        ]
        raise ApiError(
            403,
            "Forbidden",
            f'{_qualified(kind)} "{name}" is forbidden: unable to create new content in '
            f"namespace {namespace} because it is being terminated",
            details,
        )

    def _to_storage(self, kind: Kind, version: str, obj: Obj) -> Obj:
        if version == kind.storage:
            return obj
        if kind.group == "kueue.x-k8s.io":
            from webhook.convert import convert_object

            return convert_object(obj, kind.api_version(kind.storage))
        out = copy.deepcopy(obj)
        out["apiVersion"] = kind.api_version(kind.storage)
        return out

    def to_version(self, kind: Kind, version: str, obj: Obj) -> Obj:
        if version == kind.storage:
            return obj
        if kind.group == "kueue.x-k8s.io":
            from webhook.convert import convert_object

            return convert_object(obj, kind.api_version(version))
        out = copy.deepcopy(obj)
        out["apiVersion"] = kind.api_version(version)
        return out

    def _prepare(
        self, kind: Kind, version: str, obj: Obj, name: str, validation: str = "Warn"
    ) -> tuple[Obj, list[str]]:
        """Defaults, pruning and schema validation for custom resources; the warnings.

        Unknown fields follow `fieldValidation` as kube-apiserver does: Strict refuses them
        (400), Warn (the default) prunes them with a warning each, Ignore prunes them
        silently. (Built-in kinds have no schema here: their unknown fields pass.)"""
        warnings: list[str] = []
        if kind.crd:
            schema = kind.schemas.get(version) or {}
            unknown = schemas.prune(obj, schema)
            if unknown and validation == "Strict":
                fields = ", ".join(f'unknown field "{path}"' for path in unknown)
                raise ApiError(
                    400,
                    "BadRequest",
                    f'{kind.kind} in version "{version}" cannot be handled as a {kind.kind}: '
                    f"strict decoding error: {fields}",
                )
            if validation != "Ignore":
                warnings = [f'unknown field "{path}"' for path in unknown]
            schemas.apply_defaults(obj, schema)
            errors = schemas.validate(obj, schema)
            if errors:
                raise invalid(kind, name, errors)
        return obj, warnings

    def _admission(
        self,
        kind: Kind,
        version: str,
        operation: str,
        obj: Obj,
        old: Obj | None,
        user: Obj,
        dry_run: bool,
    ) -> tuple[Obj, list[str]]:
        with self.store.lock:  # read under the lock; the webhooks are called after it
            configurations = [
                ("mutating", copy.deepcopy(c))
                for c in self.store.objects[
                    "mutatingwebhookconfigurations.admissionregistration.k8s.io"
                ].values()
            ] + [
                ("validating", copy.deepcopy(c))
                for c in self.store.objects[
                    "validatingwebhookconfigurations.admissionregistration.k8s.io"
                ].values()
            ]
            if not configurations:
                return obj, []
            namespace = (obj.get("metadata") or {}).get("namespace") or ""
            ns_obj = self.store.get(self.kind("namespaces"), "", namespace) if namespace else None
            ns_labels = dict(((ns_obj or {}).get("metadata") or {}).get("labels") or {})
        if ns_obj is not None:
            ns_labels.setdefault("kubernetes.io/metadata.name", namespace)
        outcome = admit(
            configurations,
            group=kind.group,
            version=version,
            kind=kind.kind,
            plural=kind.plural,
            operation=operation,
            obj=obj,
            old=old,
            namespace_labels=ns_labels,
            user=user,
            dry_run=dry_run,
        )
        return outcome.obj, outcome.warnings

    def create(
        self,
        kind: Kind,
        version: str,
        namespace: str | None,
        body: Obj,
        user: Obj,
        dry_run: bool = False,
        validation: str = "Warn",
    ) -> tuple[Obj, list[str]]:
        if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if kind.namespaced:
            namespace = namespace or meta.get("namespace") or "default"
            if meta.get("namespace") not in (None, namespace):
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does "
                    "not match the namespace sent on the request",
                )
            meta["namespace"] = namespace
        obj["apiVersion"] = kind.api_version(version)
        obj["kind"] = kind.kind
        for field_name in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp"):
            meta.pop(field_name, None)
        if kind.status_subresource and not kind.status_on_create:
            obj.pop("status", None)
        if kind.spec_is_generation:
            meta["generation"] = 1
        with self.store.lock:
            self._fault(
                "POST", kind, "", meta.get("name") or meta.get("generateName", ""), user["username"]
            )
            if kind.namespaced:
                self._check_namespace(kind, namespace or "")
                self._check_not_terminating(kind, namespace or "", meta.get("name") or "")
            default_job(kind, obj)
        warnings: list[str] = []
        if kind.group != "admissionregistration.k8s.io":  # webhook rules decide the rest
            # Without the store's lock, as kube-apiserver calls webhooks: a webhook may read
            # the API meanwhile (Tower's reads a job's LocalQueue, as Kueue's does).
            obj, warnings = self._admission(kind, version, "CREATE", obj, None, user, dry_run)
            meta = obj["metadata"]
        with self.store.lock:
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise invalid(
                        kind,
                        "",
                        ["metadata.name: Required value: name or generateName is required"],
                    )
                meta["name"] = self.store.generate_name(meta["generateName"])
            name = meta["name"]
            if not _NAME.match(name) or len(name) > 253:
                raise invalid(
                    kind,
                    name,
                    [
                        f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain '
                        "must consist of lower case alphanumeric characters, '-' or '.', and must "
                        "start and end with an alphanumeric character"
                    ],
                )
            obj, unknown = self._prepare(kind, version, obj, name, validation)
            warnings += unknown
            stored_form = self._to_storage(kind, version, obj)
            if self.store.get(kind, namespace or "", name) is not None:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{_qualified(kind)} "{name}" already exists',
                    {"name": name, "group": kind.group, "kind": kind.plural},
                )
            if kind.plural == "jobs":
                stamp_job_labels(stored_form)
            if dry_run:
                result = copy.deepcopy(stored_form)
            else:
                result = self._commit(kind, "ADDED", stored_form)
                if kind.key == "customresourcedefinitions.apiextensions.k8s.io":
                    self._serve_crd(result)
        return self.to_version(kind, version, result), warnings

    def _serve_crd(self, crd: Obj) -> None:
        spec = crd["spec"]
        versions = [v for v in spec["versions"] if v.get("served")]
        versions.sort(key=lambda v: not v.get("storage"))
        names = spec["names"]
        kind = Kind(
            spec["group"],
            [v["name"] for v in versions],
            names["plural"],
            names["kind"],
            spec["scope"] == "Namespaced",
            any("status" in (v.get("subresources") or {}) for v in versions),
            list(names.get("shortNames") or []),
            names.get("singular", ""),
            list(names.get("categories") or []),
            {v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") or {} for v in versions},
            {v["name"]: list(v.get("additionalPrinterColumns") or []) for v in versions},
            crd=True,
        )
        self.store.register(kind)

    def update(
        self,
        kind: Kind,
        version: str,
        namespace: str,
        name: str,
        body: Obj,
        sub: str,
        user: Obj,
        method: str = "PUT",
        precondition: str | None = None,
        validation: str = "Warn",
    ) -> tuple[Obj, list[str]]:
        with self.store.lock:
            self._fault(method, kind, sub, name, user["username"])
            current = self.store.get(kind, namespace, name)
            if current is None:
                raise not_found(kind, name)
            wanted = (
                (body.get("metadata") or {}).get("resourceVersion")
                if method == "PUT"
                else precondition
            )
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise conflict(kind, name)
            old = self.to_version(kind, version, copy.deepcopy(current))
            new = copy.deepcopy(body)
            new["apiVersion"], new["kind"] = kind.api_version(version), kind.kind
            meta = new.setdefault("metadata", {})
            for immutable in (
                "uid",
                "creationTimestamp",
                "namespace",
                "name",
                "generation",
                "deletionTimestamp",
            ):
                if immutable in old["metadata"]:
                    meta[immutable] = old["metadata"][immutable]
            if sub == "status":
                merged = copy.deepcopy(old)
                if "status" in new:
                    merged["status"] = new["status"]
                else:
                    merged.pop("status", None)
                new = merged
            elif kind.status_subresource:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            if old["metadata"].get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(
                    old["metadata"].get("finalizers") or []
                )
                if added:
                    raise invalid(
                        kind,
                        name,
                        [
                            "metadata.finalizers: Forbidden: no new finalizers can be added "
                            "if the object is being deleted, found new finalizers "
                            + json.dumps(sorted(added))
                        ],
                    )
            warnings: list[str] = []
            if sub == "status" and kind.plural == "jobs" and kind.group == "batch":
                check_job_status(kind, new)
            if sub != "status":
                if kind.plural == "jobs":
                    check_job_update(kind, old, new)
                if kind.group != "admissionregistration.k8s.io":
                    new, warnings = self._admission(kind, version, "UPDATE", new, old, user, False)
            new, unknown = self._prepare(kind, version, new, name, validation)
            warnings += unknown
            if kind.spec_is_generation and _spec_of(new) != _spec_of(old):
                new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            stored_form = self._to_storage(kind, version, new)
            if stored_form == self._to_storage(kind, version, old):
                return old, warnings  # a no-op write keeps the resourceVersion, as in etcd
            meta = stored_form["metadata"]
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                # Its last finalizer removed: a deletion that was waiting completes.
                result = self._commit(kind, "DELETED", stored_form)
                return self.to_version(kind, version, result), warnings
            result = self._commit(kind, "MODIFIED", stored_form)
        return self.to_version(kind, version, result), warnings

    def patch(
        self,
        kind: Kind,
        version: str,
        namespace: str,
        name: str,
        content_type: str,
        patch: Any,
        sub: str,
        user: Obj,
        validation: str = "Warn",
    ) -> tuple[Obj, list[str]]:
        with self.store.lock:
            current = self.store.get(kind, namespace, name)
            if current is None:
                self._fault("PATCH", kind, sub, name, user["username"])
                raise not_found(kind, name)
            old = self.to_version(kind, version, copy.deepcopy(current))
            precondition = None
            if content_type == "application/json-patch+json":
                try:
                    new = jsonpatch.apply_patch(old, patch)
                except (
                    jsonpatch.JsonPatchException,
                    jsonpatch.JsonPointerException,
                    TypeError,
                    KeyError,
                ):
                    raise ApiError(
                        422,
                        "Invalid",
                        "the server rejected our request due to an error in our request",
                        {},
                    ) from None
            elif content_type == "application/merge-patch+json":
                if not isinstance(patch, dict):
                    raise ApiError(
                        400, "BadRequest", "the body of the request was in an unknown format"
                    )
                precondition = (patch.get("metadata") or {}).get("resourceVersion")
                new = merge_patch(old, patch)
            elif content_type == "application/strategic-merge-patch+json":
                if not isinstance(patch, dict):
                    raise ApiError(
                        400, "BadRequest", "the body of the request was in an unknown format"
                    )
                precondition = (patch.get("metadata") or {}).get("resourceVersion")
                new = strategic_merge_patch(old, patch)
            else:
                raise ApiError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
            new.setdefault("metadata", {})["resourceVersion"] = current["metadata"][
                "resourceVersion"
            ]
            return self.update(
                kind, version, namespace, name, new, sub, user, "PATCH", precondition, validation
            )

    def delete(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        propagation: str | None,
        user: str = "",
        grace: int | None = None,  # DeleteOptions.gracePeriodSeconds
    ) -> Obj:
        with self.store.lock:
            self._fault("DELETE", kind, "", name, user)
            current = self.store.get(kind, namespace, name)
            if current is None:
                raise not_found(kind, name)
            if propagation is None:
                propagation = "Orphan" if kind.plural == "jobs" else "Background"
            if current["metadata"].get("finalizers"):
                # Finalizers hold it: it is only marked; it goes when the last is removed.
                marked = copy.deepcopy(current)
                meta = marked["metadata"]
                # As kube-apiserver: a second delete may only shorten the grace period.
                shorter = grace is not None and grace < meta.get(
                    "deletionGracePeriodSeconds", grace + 1
                )
                if not meta.get("deletionTimestamp") or shorter:
                    meta.setdefault("deletionTimestamp", now_rfc3339())
                    if grace is not None:
                        meta["deletionGracePeriodSeconds"] = grace
                    marked = self._commit(kind, "MODIFIED", marked)
                return self.to_version(kind, kind.storage, marked)
            self._commit(kind, "DELETED", copy.deepcopy(current))
            if kind.key == "customresourcedefinitions.apiextensions.k8s.io":
                spec = current["spec"]
                self.store.unregister(f"{spec['names']['plural']}.{spec['group']}")
        uid = current["metadata"]["uid"]
        if propagation == "Orphan":
            self._orphan(uid)
        else:
            timer = threading.Timer(self.gc_delay, self._collect, args=(uid,))
            timer.daemon = True
            timer.start()
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "group": kind.group, "kind": kind.plural, "uid": uid},
        }

    def _dependents(self, uid: str) -> Iterator[tuple[Kind, Obj]]:
        for key, objects in self.store.objects.items():
            kind = self.store.kinds.get(key)
            if kind is None:
                continue
            for obj in list(objects.values()):
                owners = obj["metadata"].get("ownerReferences") or []
                if any(o.get("uid") == uid for o in owners):
                    yield kind, obj

    def _collect(self, uid: str) -> None:
        """The garbage collector: delete what the deleted owner owned."""
        if self._closing.is_set():
            return
        with self.store.lock:
            doomed = list(self._dependents(uid))
            for kind, obj in doomed:
                self._commit(kind, "DELETED", copy.deepcopy(obj))
        for _, obj in doomed:
            self._collect(obj["metadata"]["uid"])

    def _orphan(self, uid: str) -> None:
        with self.store.lock:
            for kind, obj in list(self._dependents(uid)):
                updated = copy.deepcopy(obj)
                updated["metadata"]["ownerReferences"] = [
                    o for o in updated["metadata"]["ownerReferences"] if o.get("uid") != uid
                ] or None
                if updated["metadata"]["ownerReferences"] is None:
                    del updated["metadata"]["ownerReferences"]
                self._commit(kind, "MODIFIED", updated)


def _spec_of(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def default_job(kind: Kind, obj: Obj) -> None:
    """batch/v1 Job defaults that exist before mutating webhooks run (see the fixtures)."""
    if kind.plural != "jobs":
        return
    spec = obj.setdefault("spec", {})
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", spec["parallelism"] if "completions" not in spec else 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    pod = spec.setdefault("template", {}).setdefault("spec", {})
    pod.setdefault("restartPolicy", "Never")
    pod.setdefault("terminationGracePeriodSeconds", 30)
    pod.setdefault("dnsPolicy", "ClusterFirst")
    pod.setdefault("schedulerName", "default-scheduler")


def stamp_job_labels(obj: Obj) -> None:
    """The selector and template labels the Job strategy adds once the uid exists."""
    uid = obj["metadata"].setdefault("uid", str(uuid.uuid4()))
    name = obj["metadata"]["name"]
    spec = obj["spec"]
    spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    labels = spec["template"].setdefault("metadata", {}).setdefault("labels", {})
    labels.update(
        {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
    )


def check_job_update(kind: Kind, old: Obj, new: Obj) -> None:
    """The pod template is immutable once the Job has a startTime (even re-suspended)."""
    started = bool((old.get("status") or {}).get("startTime"))
    if started and (new.get("spec") or {}).get("template") != (old.get("spec") or {}).get(
        "template"
    ):
        raise invalid(
            kind,
            old["metadata"]["name"],
            ["spec.template: Invalid value: core.PodTemplateSpec{...}: field is immutable"],
        )


def check_job_status(kind: Kind, new: Obj) -> None:
    """kube-apiserver v1.32 refuses a finished Job (Complete or Failed) that still counts
    active pods or uncounted terminated ones (seen on a real control plane: a status merged
    into the previous one kept `active: 1`)."""
    status = new.get("status") or {}
    finished = any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    if not finished:
        return
    errors = []
    active = status.get("active") or 0
    if active:
        errors.append(
            f"status.active: Invalid value: {active}: active>0 is invalid for finished job"
        )
    uncounted = status.get("uncountedTerminatedPods") or {}
    if uncounted.get("succeeded") or uncounted.get("failed"):
        errors.append(
            "status.uncountedTerminatedPods: Invalid value: uncountedTerminatedPods needs to be "
            "empty for finished job"
        )
    if errors:
        raise invalid(kind, new["metadata"]["name"], errors)


class _Handler(BaseHTTPRequestHandler):
    api: ApiDouble
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm and the
        # client's delayed ACK add 40 ms to every answer (kube-apiserver's Go net/http sets it).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._swallow = False
        self._method = ""
        self._began = 0.0
        self._username = ""
        self._token = ""
        with self.api._connections_lock:
            self.api._connections.add(self.connection)

    def finish(self) -> None:
        with self.api._connections_lock:
            self.api._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def _reset(self) -> None:
        """Close the connection without an answer (the client sees it reset)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            self.connection.shutdown(socket.SHUT_RDWR)

    def _hang(self) -> None:
        """This user's network is cut: no answer until it heals, then the connection drops."""
        while self._token in self.api.hung and not self.api._closing.is_set():
            time.sleep(0.02)
        self._reset()

    # ----- plumbing ----------------------------------------------------------------------

    def _send(
        self,
        code: int,
        body: Any,
        warnings: list[str] = (),
        ctype: str = "application/json",
        retry_after: int | None = None,
    ) -> None:
        if self._method not in ("GET", ""):
            now = time.monotonic()
            if code < 400:
                self.api.writes.append((now, self._token, self._method, self.path, code))
            self.api.write_spans.append((self._began, now, self._token, self._method, self.path))
        if self._swallow:
            self._reset()  # committed, but the answer is lost on the way
            return
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for warning in warnings:
            self.send_header("Warning", f'299 - "{warning}"')
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(
                400,
                "BadRequest",
                "the body of the request was in an unknown format: invalid character",
            ) from None

    def _user(self) -> Obj:
        auth = self.headers.get("Authorization") or ""
        token = auth[7:] if auth.startswith("Bearer ") else None
        self._token = token or ""
        return self.api.user_for(token)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        user = self._user()
        self._method, self._username, self._swallow = method, user["username"], False
        self._began = time.monotonic()
        self.api.requests.append((method, parts.path, user["username"]))
        self.api.calls.append((method, parts.path, query, user["username"]))
        try:
            body = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") else None
            if self._token in self.api.hung:
                self._hang()
                return
            for route in self.api.routes:
                answer = route(method, parts.path, query, self._username)
                if answer is not None:
                    self._send(*answer)
                    return
            if self._review(method, parts.path, body, user):
                return
            if self._discovery(method, parts.path):
                return
            route = self._route(parts.path)
            if route is None:
                self._send(404, b"404 page not found\n", ctype="text/plain; charset=utf-8")
                return
            self._authorize(method, route, query)
            if method != "GET" and self.api.write_latency > 0:
                time.sleep(self.api.write_latency)  # etcd's commit, on a real API server
            fault = self.api.transport_fault(method, route[0], route[4], self._username)
            if fault is not None and fault.action == "reset":
                self._reset()
                return
            if fault is not None and fault.action == "delay":
                time.sleep(fault.delay)
            self._swallow = fault is not None and fault.action == "commit-reset"
            self._resource(method, route, query, body, user)
        except ApiError as err:
            self._send(err.code, err.status(), retry_after=err.retry_after)
        except AdmissionError as err:
            self._send(err.code, ApiError(err.code, err.reason, err.message).status())
        except (BrokenPipeError, ConnectionResetError):
            return

    def _authorize(
        self, method: str, route: tuple[Kind, str, str | None, str | None, str], query: dict
    ) -> None:
        kind, _, namespace, name, sub = route
        if self._username not in self.api.rbac:
            return
        if method == "GET":
            verb = "get" if name else ("watch" if query.get("watch") in ("1", "true") else "list")
        else:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
        resource = kind.plural + (f"/{sub}" if sub else "")
        if self.api.permits(self._username, kind.group, resource, verb, namespace):
            return
        where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        what = f'{_qualified(kind)} "{name}"' if name else _qualified(kind)
        raise ApiError(
            403,
            "Forbidden",
            f'{what} is forbidden: User "{self._username}" cannot {verb} resource "{resource}" '
            f'in API group "{kind.group}" {where}',
            {"name": name, "group": kind.group, "kind": kind.plural}
            if name
            else {"group": kind.group, "kind": kind.plural},
        )

    def _review(self, method: str, path: str, body: Any, user: Obj) -> bool:
        """SelfSubjectReview (who am I) and SelfSubjectAccessReview (may I); TokenReview
        and SubjectAccessReview (reviews.py)."""
        if method != "POST":
            return False
        delegated = reviews.answer(self.api, self._username, path, body)
        if delegated is not None:
            self._send(*delegated)
            return True
        if path == "/apis/authentication.k8s.io/v1/selfsubjectreviews":
            self._send(
                201,
                {
                    "kind": "SelfSubjectReview",
                    "apiVersion": "authentication.k8s.io/v1",
                    "metadata": {"creationTimestamp": None},
                    "status": {"userInfo": user},
                },
            )
            return True
        if path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
            spec = (body or {}).get("spec") or {}
            attrs = spec.get("resourceAttributes") or {}
            resource = str(attrs.get("resource", "")) + (
                f"/{attrs['subresource']}" if attrs.get("subresource") else ""
            )
            allowed = self.api.permits(
                self._username,
                str(attrs.get("group", "")),
                resource,
                str(attrs.get("verb", "")),
                attrs.get("namespace") or None,
            )
            self._send(
                201,
                {
                    "kind": "SelfSubjectAccessReview",
                    "apiVersion": "authorization.k8s.io/v1",
                    "metadata": {"creationTimestamp": None},
                    "spec": spec,
                    "status": {"allowed": allowed},
                },
            )
            return True
        return False

    # ----- discovery -----------------------------------------------------------------------

    def _openapi(self, group_version: str) -> bool:
        """Just enough OpenAPI v3 for kubectl to see that every resource's PATCH takes
        `fieldValidation`, so it validates on the server (as against kube-apiserver) instead
        of downloading schemas: paths and PATCH operations, no schemas."""
        served: dict[str, list[tuple[Kind, str]]] = {}
        for kind in self.api.store.kinds.values():
            for version in kind.versions:
                gv = f"apis/{kind.group}/{version}" if kind.group else f"api/{version}"
                served.setdefault(gv, []).append((kind, version))
        if not group_version:
            self._send(
                200,
                {
                    "paths": {
                        gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={self.api.store.rv}"}
                        for gv in sorted(served)
                    }
                },
            )
            return True
        kinds = served.get(group_version)
        if kinds is None:
            self._send(404, b"404 page not found\n", ctype="text/plain; charset=utf-8")
            return True
        parameter = {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}
        paths = {}
        for kind, version in kinds:
            scope = "/namespaces/{namespace}" if kind.namespaced else ""
            gvk = {"group": kind.group, "version": version, "kind": kind.kind}
            paths[f"/{group_version}{scope}/{kind.plural}/{{name}}"] = {
                "patch": {
                    "x-kubernetes-group-version-kind": gvk,
                    "parameters": [parameter],
                    "responses": {"200": {"description": "OK"}},
                }
            }
        self._send(
            200,
            {
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes (API double)", "version": "v1.32.0"},
                "paths": paths,
            },
        )
        return True

    def _discovery(self, method: str, path: str) -> bool:
        if method != "GET":
            return False
        path = path.rstrip("/")
        store = self.api.store
        kinds = list(store.kinds.values())
        if path.startswith("/openapi/v3"):
            return self._openapi(path[len("/openapi/v3") :].strip("/"))
        if path == "/version":
            self._send(
                200,
                {
                    "major": "1",
                    "minor": "32",
                    "gitVersion": "v1.32.0-apidouble",
                    "platform": "linux/amd64",
                },
            )
            return True
        if path == "/api":
            self._send(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}
                    ],
                },
            )
            return True
        groups: dict[str, list[str]] = {}
        for kind in kinds:
            if kind.group:
                groups.setdefault(kind.group, [])
                for version in kind.versions:
                    if version not in groups[kind.group]:
                        groups[kind.group].append(version)

        def group_doc(name: str) -> Obj:
            versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in groups[name]]
            return {"name": name, "versions": versions, "preferredVersion": versions[0]}

        if path == "/apis":
            self._send(
                200,
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [group_doc(g) for g in sorted(groups)],
                },
            )
            return True
        match = re.fullmatch(r"/apis/([^/]+)", path)
        if match and match.group(1) in groups:
            self._send(200, {"kind": "APIGroup", "apiVersion": "v1", **group_doc(match.group(1))})
            return True
        match = re.fullmatch(r"/api/(v1)|/apis/([^/]+)/([^/]+)", path)
        if match:
            group = match.group(2) or ""
            version = match.group(1) or match.group(3)
            served = [k for k in kinds if k.group == group and version in k.versions]
            if not served:
                return False
            resources = []
            for kind in sorted(served, key=lambda k: k.plural):
                entry = {
                    "name": kind.plural,
                    "singularName": kind.singular or kind.kind.lower(),
                    "namespaced": kind.namespaced,
                    "kind": kind.kind,
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                }
                if kind.short_names:
                    entry["shortNames"] = kind.short_names
                if kind.categories:
                    entry["categories"] = kind.categories
                resources.append(entry)
                if kind.status_subresource:
                    resources.append(
                        {
                            "name": f"{kind.plural}/status",
                            "singularName": "",
                            "namespaced": kind.namespaced,
                            "kind": kind.kind,
                            "verbs": ["get", "patch", "update"],
                        }
                    )
            doc: Obj = {
                "kind": "APIResourceList",
                "groupVersion": f"{group}/{version}" if group else version,
                "resources": resources,
            }
            if group:
                doc["apiVersion"] = "v1"
            self._send(200, doc)
            return True
        return False

    # ----- resources -------------------------------------------------------------------------

    def _route(self, path: str) -> tuple[Kind, str, str | None, str | None, str] | None:
        segments = [unquote(s) for s in path.strip("/").split("/")]
        if len(segments) >= 2 and segments[0] == "api":
            group, version, rest = "", segments[1], segments[2:]
        elif len(segments) >= 3 and segments[0] == "apis":
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            return None
        served = {
            k.plural: k
            for k in self.api.store.kinds.values()
            if k.group == group and version in k.versions
        }
        if not served and not any(k.group == group for k in self.api.store.kinds.values()):
            return None
        namespace = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and rest[2] in served
            and served[rest[2]].namespaced
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest or rest[0] not in served or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        kind = served[rest[0]]
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else ""
        if sub and not (sub == "status" and kind.status_subresource):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        return kind, version, namespace, name, sub

    def _resource(
        self,
        method: str,
        route: tuple[Kind, str, str | None, str | None, str],
        query: dict[str, str],
        body: Any,
        user: Obj,
    ) -> None:
        kind, version, namespace, name, sub = route
        api = self.api
        if method == "GET" and name is None:
            if query.get("watch") in ("1", "true"):
                self._watch(kind, version, namespace, query)
            else:
                self._list(kind, version, namespace, query)
            return
        if method == "GET":
            with api.store.lock:
                obj = api.store.get(kind, namespace or "", name)
                if obj is None:
                    raise not_found(kind, name)
                obj = api.to_version(kind, version, copy.deepcopy(obj))
            if TABLE in (self.headers.get("Accept") or "") and kind.columns.get(version):
                self._send(
                    200, self._table(kind, version, [obj], obj["metadata"]["resourceVersion"])
                )
            else:
                self._send(200, obj)
            return
        dry_run = query.get("dryRun") == "All"
        if method == "POST" and name is None:
            validation = query.get("fieldValidation") or "Warn"
            obj, warnings = api.create(kind, version, namespace, body, user, dry_run, validation)
            self._send(201, obj, warnings)
        elif method == "PUT" and name is not None:
            if not isinstance(body, dict):
                raise ApiError(
                    400, "BadRequest", "the body of the request was in an unknown format"
                )
            obj, warnings = api.update(
                kind,
                version,
                namespace or "",
                name,
                body,
                sub,
                user,
                validation=query.get("fieldValidation") or "Warn",
            )
            self._send(200, obj, warnings)
        elif method == "PATCH" and name is not None:
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            obj, warnings = api.patch(
                kind,
                version,
                namespace or "",
                name,
                ctype,
                body,
                sub,
                user,
                query.get("fieldValidation") or "Warn",
            )
            self._send(200, obj, warnings)
        elif method == "DELETE" and name is not None:
            propagation = (body or {}).get("propagationPolicy") or query.get("propagationPolicy")
            grace = (body or {}).get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
            self._send(
                200,
                api.delete(
                    kind,
                    namespace or "",
                    name,
                    propagation,
                    user["username"],
                    None if grace is None else int(grace),
                ),
            )
        else:
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                {},
            )

    def _matching(
        self, kind: Kind, namespace: str | None, query: dict[str, str]
    ) -> Callable[[Obj], bool]:
        requirements = parse_selector(query.get("labelSelector") or "")
        fields = {}
        for term in (query.get("fieldSelector") or "").split(","):
            if "=" in term:
                key, value = term.split("=", 1)
                fields[key.strip().rstrip("=")] = value.strip().lstrip("=")

        def matches(obj: Obj) -> bool:
            meta = obj.get("metadata") or {}
            if namespace and meta.get("namespace") != namespace:
                return False
            if "metadata.name" in fields and meta.get("name") != fields["metadata.name"]:
                return False
            if (
                "metadata.namespace" in fields
                and meta.get("namespace") != fields["metadata.namespace"]
            ):
                return False
            return selects(requirements, meta.get("labels") or {})

        return matches

    def _list(self, kind: Kind, version: str, namespace: str | None, query: dict[str, str]) -> None:
        self.api.lists.append((self._username, kind.plural))
        matches = self._matching(kind, namespace, query)
        token = _read_continue(query.get("continue"))
        limit = int(query.get("limit") or 0)
        store = self.api.store
        with store.lock:
            # Every page of a list is the state at its first page's resourceVersion, as
            # kube-apiserver serves it: the continue token carries that version, and pages
            # after it undo the changes made since, from the watch history. A token older
            # than the history is 410 Gone, as after an etcd compaction.
            if token is None:
                snapshot, after = store.rv, None
            else:
                snapshot, after = token
                if snapshot < store.oldest[kind.key]:
                    raise ApiError(410, "Expired", CONTINUE_EXPIRED)
            then = store.changed_since(kind, snapshot) if token is not None else {}
            keys = store.sorted_keys(kind)
            if then:
                keys = sorted(set(keys) | then.keys())
            # The continue token names the last key handed out: each page costs its own
            # size, not the whole list's (lists here may be 100,000 long).
            page: list[Obj] = []
            more = False
            objects = store.objects[kind.key]
            for ident in keys[bisect.bisect_right(keys, after) if after else 0 :]:
                obj = then[ident] if ident in then else objects.get(ident)
                if obj is None or not matches(obj):
                    continue
                if limit and len(page) == limit:
                    more = True
                    break
                page.append(obj)
            page = [copy.deepcopy(o) for o in page]
        rv = str(snapshot)
        meta: Obj = {"resourceVersion": rv}
        if more:
            last = page[-1]["metadata"]
            meta["continue"] = _write_continue(snapshot, (last.get("namespace", ""), last["name"]))
        converted = [self.api.to_version(kind, version, o) for o in page]
        if TABLE in (self.headers.get("Accept") or "") and kind.columns.get(version):
            self._send(200, self._table(kind, version, converted, rv))
            return
        for item in converted:
            item.pop("apiVersion", None)
            item.pop("kind", None)
        self._send(
            200,
            {
                "kind": f"{kind.kind}List",
                "apiVersion": kind.api_version(version),
                "metadata": meta,
                "items": converted,
            },
        )

    def _table(self, kind: Kind, version: str, objs: list[Obj], rv: str) -> Obj:
        columns = kind.columns[version]
        definitions = [
            {
                "name": "Name",
                "type": "string",
                "format": "name",
                "description": "Name must be unique within a namespace.",
                "priority": 0,
            }
        ]
        for column in columns:
            definitions.append(
                {
                    "name": column["name"],
                    "type": column["type"],
                    "format": column.get("format", ""),
                    "description": column.get("description", ""),
                    "priority": column.get("priority", 0),
                }
            )
        rows = []
        for obj in objs:
            cells: list[Any] = [obj["metadata"]["name"]]
            for column in columns:
                compute = column.get("compute")
                value = compute(obj) if compute else json_path(obj, column["jsonPath"])
                if column["type"] == "date" and value:
                    value = _age(value)
                cells.append(value)
            rows.append(
                {
                    "cells": cells,
                    "object": {
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": obj["metadata"],
                    },
                }
            )
        return {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": rv},
            "columnDefinitions": definitions,
            "rows": rows,
        }

    def _watch(
        self, kind: Kind, version: str, namespace: str | None, query: dict[str, str]
    ) -> None:
        api = self.api
        store = api.store
        matches = self._matching(kind, namespace, query)
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        timeout = float(query.get("timeoutSeconds") or 1800)
        since = query.get("resourceVersion") or ""
        watcher = Watcher(namespace, None)
        backlog: list[tuple[str, Obj]] = []
        expired = None
        with store.lock:
            if since in ("", "0"):
                backlog = [
                    ("ADDED", copy.deepcopy(o), None) for o in store.objects[kind.key].values()
                ]
            elif int(since) < store.oldest[kind.key]:
                expired = f"too old resource version: {since} ({store.oldest[kind.key]})"
            else:
                backlog = [
                    (t, o, old) for rv, t, o, old, _ in store.history[kind.key] if rv > int(since)
                ]
            if expired is None:
                store.watchers[kind.key].append(watcher)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def selected(event_type: str, obj: Obj, old_labels: dict[str, str] | None) -> str | None:
            """The event a watcher of this selection sees, if any."""
            now = matches(obj)
            if event_type != "MODIFIED" or old_labels is None:
                return event_type if now else None
            before = matches({**obj, "metadata": {**obj["metadata"], "labels": old_labels}})
            if now:
                return "MODIFIED" if before else "ADDED"
            return "DELETED" if before else None

        def emit(event_type: str, obj: Obj) -> None:
            line = json.dumps({"type": event_type, "object": obj}).encode() + b"\n"
            self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.flush()

        try:
            if expired is not None:
                emit(
                    "ERROR",
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Failure",
                        "message": expired,
                        "reason": "Expired",
                        "code": 410,
                    },
                )
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                return
            for event_type, obj, old_labels in backlog:
                seen = selected(event_type, obj, old_labels)
                if seen is not None:
                    emit(seen, api.to_version(kind, version, obj))
            deadline = time.monotonic() + timeout
            next_bookmark = time.monotonic() + api.bookmark_interval
            while not api._closing.is_set():
                if self._token in api.hung:
                    self._hang()  # a cut network: the stream stalls, then drops
                    return
                now = time.monotonic()
                remaining = min(deadline, next_bookmark, now + 0.1) - now
                if time.monotonic() >= deadline:
                    break
                if remaining <= 0:
                    # A bookmark promises every event up to its resourceVersion was sent:
                    # only when none is waiting (commits queue events under the same lock).
                    with store.lock:
                        current = str(store.rv) if watcher.events.empty() else None
                    if bookmarks and current is not None:
                        emit(
                            "BOOKMARK",
                            {
                                "kind": kind.kind,
                                "apiVersion": kind.api_version(version),
                                "metadata": {"resourceVersion": current, "creationTimestamp": None},
                            },
                        )
                        next_bookmark = time.monotonic() + api.bookmark_interval
                        continue
                    if current is not None:
                        next_bookmark = time.monotonic() + api.bookmark_interval
                        continue
                    remaining = 0.001  # send what waits first; the bookmark comes after
                try:
                    item = watcher.events.get(timeout=remaining)
                except Exception:  # queue.Empty
                    continue
                if item is None:
                    break
                event_type, obj, old_labels = item
                seen = selected(event_type, obj, old_labels)
                if seen is not None:
                    emit(seen, api.to_version(kind, version, obj))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        finally:
            with store.lock:
                if watcher in store.watchers.get(kind.key, []):
                    store.watchers[kind.key].remove(watcher)
            self.close_connection = True


def _age(stamp: str) -> str:
    return _since(
        int(time.time() - datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    )


def _since(seconds: int) -> str:
    if seconds < 120:
        return f"{max(seconds, 0)}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


__all__ = ["ADMIN", "ApiDouble", "ApiError", "Fault", "now_rfc3339"]
