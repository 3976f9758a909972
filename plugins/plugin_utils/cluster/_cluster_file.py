# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read and validate an AMD CVS ``cluster.json`` (controller side, standard library only).

Private to this collection (leading underscore): no compatibility promise outside it.

Every rejection is one ``ClusterFileError`` whose text names the file, the key path and what to
do, because the user's first contact with a bad file must be a line they can act on, not a
traceback or an empty inventory.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.aorta.cluster.plugins.module_utils.node_runtime._words import first_names

# CVS rejects this marker anywhere in a cluster file (keys and values).
CHANGEME = "<changeme>"
USER_ID = "{user-id}"
# Template placeholders CVS ships, e.g. "{xx.xx.xx.xx|hostname}" or "{head-node-ip}". "${VAR}" is
# shell syntax, not a placeholder, and is left alone.
_PLACEHOLDER = re.compile(r"(?<!\$)\{[^{}\s\"']+\}")
_NOT_SET = ("", "NA", "N/A", "na", "n/a", None)
# How many node names a message lists before "and N more": one line, whatever the node count.
_NAMES_SHOWN = 5
# Keys a node entry may not set: they would silently rewire the connection or our own host vars.
_RESERVED_PREFIXES = ("ansible_", "aorta_")
# Top-level blocks that may hold credentials (CVS's racks, with switch passwords) never become
# variables: only what group_vars() and host_records() name does.
ORCHESTRATORS = ("baremetal", "container")


class ClusterFileError(ValueError):
    """A cluster file that cannot be used; ``str()`` is the one line shown to the user."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        self.path = path
        self.key = key
        self.problem = problem
        where = f"{path}: {key}: " if key else f"{path}: "
        super().__init__(where + problem)


@dataclass
class Node:
    """One ``node_dict`` entry; ``rank`` is its position in key order (0 = head)."""

    name: str
    rank: int
    vpc_ip: str
    bmc_ip: str | None = None
    rack_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Cluster:
    path: str
    username: str
    nodes: list[Node]
    priv_key_file: str | None = None
    password: str | None = None
    head_mgmt_ip: str | None = None
    env_vars: dict[str, Any] = field(default_factory=dict)
    orchestrator: str = "baremetal"
    container: dict[str, Any] | None = None
    # Lines worth telling the user once per file (never errors), e.g. that no node has a vpc_ip.
    notes: list[str] = field(default_factory=list)

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def workers(self) -> list[Node]:
        return self.nodes[1:]


def controller_user(environ: dict[str, str] | None = None) -> str:
    """What CVS puts in place of ``{user-id}``: $USER, $LOGNAME, $USERNAME, else root."""
    env = os.environ if environ is None else environ
    for name in ("USER", "LOGNAME", "USERNAME"):
        if env.get(name):
            return env[name]
    return "root"


class _Object(dict):
    """A decoded JSON object that remembers keys the text gave more than once."""

    repeated: tuple = ()


def _keep_repeats(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        repeated = []
        for key, _value in pairs:
            if key in seen:
                repeated.append(key)
            seen.add(key)
        obj.repeated = tuple(repeated)
    return obj


def _first_repeat(value: Any, key_path: str) -> str | None:
    """Key path of the first key given twice (json.load would silently keep the last one)."""
    if isinstance(value, _Object) and value.repeated:
        return f"{key_path}.{value.repeated[0]}" if key_path else value.repeated[0]
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in children:
        found = _first_repeat(item, f"{key_path}.{key}" if key_path else str(key))
        if found:
            return found
    return None


def loads(text: str | bytes, path: str) -> dict[str, Any]:
    """Decode cluster-file text, refusing empty input, non-objects and repeated keys."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ClusterFileError(path, "", f"not UTF-8 text (byte {exc.start}); save it as UTF-8 JSON") from None
    if not text.strip():
        raise ClusterFileError(path, "", "file is empty; expected a JSON object with node_dict")
    try:
        data = json.loads(text, object_pairs_hook=_keep_repeats, parse_constant=_no_constants(path))
    except json.JSONDecodeError as exc:
        raise ClusterFileError(
            path, "", f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg} (truncated or hand-edited?)"
        ) from None
    if not isinstance(data, dict):
        raise ClusterFileError(path, "", f"top level is a JSON {_json_type(data)}; expected an object with node_dict")
    repeated = _first_repeat(data, "")
    if repeated:
        raise ClusterFileError(path, repeated, "key appears more than once (JSON keeps only the last); keep one")
    return data


def _no_constants(path: str):
    def refuse(name: str) -> None:
        raise ClusterFileError(path, "", f"{name} is not valid JSON; use a string or a number")

    return refuse


def load(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ClusterFileError(path, "", f"cannot read: {exc.strerror}") from None
    return loads(raw, path)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    for kind, name in ((dict, "object"), (list, "array"), (str, "string"), ((int, float), "number")):
        if isinstance(value, kind):
            return name
    return "value"


def _walk(value: Any, key_path: str):
    """Yield (key path, key or value string) for every key and string in a JSON document."""
    if isinstance(value, dict):
        for key, item in value.items():
            child = f"{key_path}.{key}" if key_path else key
            yield child, key
            yield from _walk(item, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{key_path}[{index}]")
    elif isinstance(value, str):
        yield key_path, value


def _resolve(value: Any, user: str) -> Any:
    """Replace ``{user-id}`` in every key and string, as CVS does."""
    if isinstance(value, dict):
        return {_resolve(k, user): _resolve(v, user) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, user) for v in value]
    if isinstance(value, str):
        return value.replace(USER_ID, user)
    return value


def _is_comment(key: str) -> bool:
    return key.startswith("_")


def _require_str(path: str, key: str, value: Any, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ClusterFileError(path, key, f"must be a string, got JSON {_json_type(value)}")
    if not allow_empty and not value.strip():
        raise ClusterFileError(path, key, "must not be empty")
    return value


def _check_placeholder(path: str, key: str, text: str) -> None:
    match = _PLACEHOLDER.search(text)
    if match and match.group(0) != USER_ID:
        raise ClusterFileError(
            path, key, f"still holds the template placeholder {match.group(0)!r}; replace it with the real value"
        )


def parse(data: dict[str, Any], path: str, user: str | None = None) -> Cluster:
    """Validate decoded cluster-file data and return it as a ``Cluster`` in node_dict order."""
    for key_path, text in _walk(data, ""):
        if CHANGEME in text:
            raise ClusterFileError(path, key_path, f"contains {CHANGEME}; fill in the real value")

    if "node_dict" not in data:
        raise ClusterFileError(path, "node_dict", "missing; list the nodes as {address: {vpc_ip: ...}}")
    user = controller_user() if user is None else user
    username, priv_key_file, password = _credentials(data, path)
    nodes = _nodes(data["node_dict"], path)
    notes = _fabric_notes(data["node_dict"], path)
    head_mgmt_ip = _head_mgmt_ip(data, path, nodes)
    env_vars, orchestrator, container = _blocks(data, path)

    resolved = _resolve(
        {
            "username": username,
            "priv_key_file": priv_key_file,
            "env_vars": env_vars,
            "container": container,
            "nodes": [(n.name, n.vpc_ip, n.extra) for n in nodes],
        },
        user,
    )
    for node, (name, vpc_ip, extra) in zip(nodes, resolved["nodes"]):
        node.name, node.vpc_ip, node.extra = name, vpc_ip, extra
    return Cluster(
        path=path,
        username=resolved["username"],
        nodes=nodes,
        priv_key_file=resolved["priv_key_file"] or None,
        password=password or None,
        head_mgmt_ip=head_mgmt_ip,
        env_vars=resolved["env_vars"],
        orchestrator=orchestrator,
        container=resolved["container"],
        notes=notes,
    )


def _credentials(data: dict[str, Any], path: str) -> tuple[str, Any, Any]:
    """(username, priv_key_file, password) as the file gives them, checked: one of the two is set."""
    username = _require_str(path, "username", data.get("username"))
    _check_placeholder(path, "username", username)

    priv_key_file = data.get("priv_key_file")
    password = data.get("password")
    if priv_key_file is not None:
        _require_str(path, "priv_key_file", priv_key_file)
        _check_placeholder(path, "priv_key_file", priv_key_file)
    if password is not None:
        _require_str(path, "password", password)
    if not priv_key_file and not password:
        raise ClusterFileError(path, "priv_key_file", "neither priv_key_file nor password is set; set one of them")
    return username, priv_key_file, password


def _nodes(node_dict: Any, path: str) -> list[Node]:
    """The nodes of ``node_dict`` in key order (rank 0 the head), checked: no address used twice."""
    if not isinstance(node_dict, dict):
        raise ClusterFileError(path, "node_dict", f"must be an object of nodes, got JSON {_json_type(node_dict)}")
    if not node_dict:
        raise ClusterFileError(path, "node_dict", "is empty; list at least one node")

    nodes: list[Node] = []
    seen_mgmt: dict[str, str] = {}
    seen_fabric: dict[str, str] = {}
    for rank, (name, entry) in enumerate(node_dict.items()):
        nodes.append(_node(path, rank, name, entry, seen_mgmt, seen_fabric))
    return nodes


def _node(path: str, rank: int, name: str, entry: Any, seen_mgmt: dict[str, str], seen_fabric: dict[str, str]) -> Node:
    """One node_dict entry as a ``Node``, checked against the addresses of the entries before it
    (``seen_mgmt`` and ``seen_fabric``, folded address -> node, which it adds its own to)."""
    key = f"node_dict.{name}"
    if not name.strip():
        raise ClusterFileError(path, key, "node address (the key) is empty")
    _check_placeholder(path, key, name)
    if not isinstance(entry, dict):
        raise ClusterFileError(path, key, f'must be an object such as {{"vpc_ip": ...}}, got JSON {_json_type(entry)}')
    folded = name.strip().lower()
    if folded in seen_mgmt:
        raise ClusterFileError(path, key, f"same management address as node_dict.{seen_mgmt[folded]}")
    seen_mgmt[folded] = name

    vpc_ip = entry.get("vpc_ip")
    if vpc_ip is not None:
        _require_str(path, f"{key}.vpc_ip", vpc_ip, allow_empty=True)
        _check_placeholder(path, f"{key}.vpc_ip", vpc_ip)
    fabric = name
    # A node without one (absent, null, "" or NA) gets its key, and only when no node has one
    # (_fabric_notes refuses a mix): its key was checked against the others' keys above.
    if _has_vpc_ip(entry):
        fabric = str(vpc_ip).strip()
        if fabric.lower() in seen_fabric:
            raise ClusterFileError(
                path,
                f"{key}.vpc_ip",
                f"fabric address {fabric} is also used by node_dict.{seen_fabric[fabric.lower()]}",
            )
        seen_fabric[fabric.lower()] = name

    bmc_ip = entry.get("bmc_ip")
    if bmc_ip is not None:
        _require_str(path, f"{key}.bmc_ip", bmc_ip, allow_empty=True)
    rack_id = entry.get("rack_id")
    if rack_id is not None:
        _require_str(path, f"{key}.rack_id", rack_id)

    extra = {}
    for attr, value in entry.items():
        if attr in ("vpc_ip", "bmc_ip", "rack_id") or _is_comment(attr):
            continue
        if attr.startswith(_RESERVED_PREFIXES):
            raise ClusterFileError(
                path, f"{key}.{attr}", "names starting with ansible_ or aorta_ are reserved; rename the key"
            )
        extra[attr] = value
    return Node(
        name=name,
        rank=rank,
        vpc_ip=fabric,
        bmc_ip=None if bmc_ip in _NOT_SET else bmc_ip,
        rack_id=rack_id,
        extra=extra,
    )


def _has_vpc_ip(entry: dict[str, Any]) -> bool:
    """Whether a node entry gives a fabric address: a ``vpc_ip`` that is not absent, null, blank or NA."""
    vpc_ip = entry.get("vpc_ip")
    return isinstance(vpc_ip, str) and vpc_ip.strip() not in _NOT_SET


def _names(names: list[str]) -> str:
    """Up to _NAMES_SHOWN names, then "and N more", so that the line stays short at any node count."""
    return first_names(names, _NAMES_SHOWN)


def _fabric_notes(node_dict: dict[str, Any], path: str) -> list[str]:
    """Refuse a file where some nodes have a ``vpc_ip`` and others not (those would silently send
    fabric traffic over their management address); when none has one, the note that says so."""
    missing = [name for name, entry in node_dict.items() if not _has_vpc_ip(entry)]
    if not missing:
        return []
    given = len(node_dict) - len(missing)
    if given:
        others = f"the other {given} node has one" if given == 1 else f"the other {given} nodes have one"
        raise ClusterFileError(
            path,
            "node_dict",
            f"vpc_ip missing on {_names(missing)} ({others}); give every node its fabric address or none",
        )
    return [
        f"{path}: node_dict: no node has a vpc_ip, so the management network (the node_dict keys) carries "
        "the fabric traffic too (rendezvous and collectives); give every node its vpc_ip to use a separate fabric"
    ]


def _head_mgmt_ip(data: dict[str, Any], path: str, nodes: list[Node]) -> str | None:
    """head_node_dict.mgmt_ip, checked to name one of ``nodes``; None without a head_node_dict."""
    head_mgmt_ip = None
    head_block = data.get("head_node_dict")
    if head_block is not None:
        if not isinstance(head_block, dict):
            raise ClusterFileError(path, "head_node_dict", f"must be an object, got JSON {_json_type(head_block)}")
        head_mgmt_ip = _require_str(path, "head_node_dict.mgmt_ip", head_block.get("mgmt_ip"))
        _check_placeholder(path, "head_node_dict.mgmt_ip", head_mgmt_ip)
        known = {n.name.lower() for n in nodes} | {n.vpc_ip.lower() for n in nodes}
        if head_mgmt_ip.strip().lower() not in known:
            raise ClusterFileError(
                path,
                "head_node_dict.mgmt_ip",
                f"{head_mgmt_ip} is not one of the node_dict keys ({', '.join(n.name for n in nodes[:4])}"
                f"{', ...' if len(nodes) > 4 else ''}); the head is the FIRST node_dict key",
            )
    return head_mgmt_ip


def _blocks(data: dict[str, Any], path: str) -> tuple[Any, Any, Any]:
    """(env_vars, orchestrator, container) as the file gives them (or their defaults), checked."""
    env_vars = data.get("env_vars", {})
    if not isinstance(env_vars, dict):
        raise ClusterFileError(path, "env_vars", f"must be an object, got JSON {_json_type(env_vars)}")
    orchestrator = data.get("orchestrator", "baremetal")
    if orchestrator not in ORCHESTRATORS:
        raise ClusterFileError(path, "orchestrator", f"must be one of {', '.join(ORCHESTRATORS)}, got {orchestrator!r}")
    container = data.get("container")
    if container is not None and not isinstance(container, dict):
        raise ClusterFileError(path, "container", f"must be an object, got JSON {_json_type(container)}")
    return env_vars, orchestrator, container


def read(path: str, user: str | None = None) -> Cluster:
    """Load, validate and resolve the cluster file at ``path``."""
    return parse(load(path), path, user)


def looks_like_cluster_file(path: str, head_bytes: int = 1 << 20) -> bool:
    """Cheap claim test for inventory routing: any ``*cluster.json``, or JSON mentioning node_dict."""
    base = os.path.basename(path)
    if base.endswith("cluster.json"):
        return True
    if not base.endswith(".json"):
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(head_bytes)
    except OSError:
        return False
    return head.lstrip()[:1] == b"{" and b'"node_dict"' in head


GROUP_ALL = "aorta_nodes"
GROUP_HEAD = "aorta_head"
GROUP_WORKERS = "aorta_workers"


def group_vars(cluster: Cluster) -> dict[str, Any]:
    """Variables of group ``aorta_nodes``: the file's blocks that apply to every node."""
    return {
        "aorta_cluster_env": cluster.env_vars,
        "aorta_cluster_orchestrator": cluster.orchestrator,
        "aorta_cluster_container": cluster.container or {},
        "aorta_cluster_file": os.path.abspath(cluster.path),
        # How many nodes the file has: a job that sees fewer (a --limit, an AWX slice) is refused.
        "aorta_cluster_nodes": len(cluster.nodes),
    }


def partial_cluster(selected: int, total: int | None) -> str:
    """Why a job that sees ``selected`` of the cluster file's ``total`` nodes must not start, or ''.

    A --limit and an AWX sliced job both look like that: each part would rendezvous alone and hang
    until its deadline (AWX's job variables carry no slice number or count to tell them apart)."""
    selected = int(selected)
    total = selected if total in (None, "") else int(total)
    if selected >= total:
        return ""
    return (
        f"{selected} of {total} nodes: a --limit or an AWX sliced job. Every node of the cluster file must start "
        "in the same job for torchrun to rendezvous: run without --limit, set the AWX job template's Job Slicing "
        "to 1, or write a cluster file holding only the nodes to run on."
    )


def host_records(cluster: Cluster, connection_vars: bool = True) -> list[dict[str, Any]]:
    """One ``{name, groups, vars, extra}`` per node in rank order; the inventory plugin and the
    ``aorta_cluster_file`` route (add_host) both build their hosts from this."""
    records = []
    for node in cluster.nodes:
        hostvars = dict(node.extra)
        hostvars.update(
            ansible_host=node.name,
            aorta_node_rank=node.rank,
            aorta_mgmt_ip=node.name,
            aorta_vpc_ip=node.vpc_ip,
            aorta_bmc_ip=node.bmc_ip,
            aorta_rack_id=node.rack_id,
        )
        if connection_vars:
            hostvars["ansible_user"] = cluster.username
            if cluster.priv_key_file:
                hostvars["ansible_ssh_private_key_file"] = cluster.priv_key_file
            if cluster.password:
                hostvars["ansible_password"] = cluster.password
        groups = [GROUP_ALL, GROUP_HEAD if node.rank == 0 else GROUP_WORKERS]
        records.append({"name": node.name, "groups": groups, "vars": hostvars, "extra": dict(node.extra)})
    return records


# Blocks of a CVS cluster file that hold switch credentials or rack inventory, never copied out.
NOT_COPIED = ("racks",)


def healthy_cluster(path: str, exclude: Sequence[str]) -> str:
    """The cluster file at ``path`` without the nodes in ``exclude`` (node_dict keys) and without
    its racks or switch blocks: JSON text for ``healthy.cluster.json``. Node order is kept, so ranks
    follow the file; a head that is excluded hands ``head_node_dict`` to the first node left."""
    data = load(path)
    gone = {str(name) for name in exclude}
    kept = {name: entry for name, entry in (data.get("node_dict") or {}).items() if name not in gone}
    out = {
        key: value
        for key, value in data.items()
        if key not in NOT_COPIED and "switch" not in key.lower() and key != "node_dict"
    }
    out["node_dict"] = kept
    head = out.get("head_node_dict")
    if isinstance(head, dict) and kept and str(head.get("mgmt_ip")) in gone:
        out["head_node_dict"] = dict(head, mgmt_ip=next(iter(kept)))
    return json.dumps(out, indent=2) + "\n"
