# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_json
short_description: Hosts, ranks and fabric addresses from an AMD CVS cluster.json
version_added: 0.1.0
author:
  - aorta.cluster maintainers (@aorta-cluster)
description:
  - Reads the C(cluster.json) that AMD's Cluster Validation Suite (CVS) uses, unchanged, and turns
    it into an inventory whose node order is the training rank order.
  - The first C(node_dict) key is the head node and node rank 0; ranks follow key order.
  - "Two ways in: pass the cluster file itself with C(-i cluster.json) (this plugin claims every
    file whose name ends in C(cluster.json), and any C(.json) object with a C(node_dict) key), or a
    YAML source file with C(plugin: aorta.cluster.cluster_json) and O(path) (the form AWX inventory
    sources use)."
  - For C(-i cluster.json) the plugin must come before C(yaml) in C([inventory] enable_plugins); the
    collection's C(ansible.cfg) does that. Otherwise the builtin C(yaml) plugin reads the file into
    zero hosts.
  - "Host variables: C(ansible_host) (the node key, the SSH or management address), C(ansible_user),
    C(ansible_ssh_private_key_file) or C(ansible_password) (unless O(connection_vars=false)),
    C(aorta_node_rank), C(aorta_mgmt_ip), C(aorta_vpc_ip) (fabric address; the key when no node of the
    file has a C(vpc_ip), with one warning saying so), C(aorta_bmc_ip), C(aorta_rack_id), and every other
    key of the node entry."
  - "Groups: C(aorta_nodes) (all, in rank order), C(aorta_head) (rank 0), C(aorta_workers) (the rest).
    Variables of group C(aorta_nodes): C(aorta_cluster_env) (the file's C(env_vars)),
    C(aorta_cluster_orchestrator), C(aorta_cluster_container), C(aorta_cluster_file), C(aorta_cluster_nodes)
    (how many nodes the file has: a job that holds fewer, a --limit or an AWX slice, is refused)."
  - C({user-id}) is replaced like CVS does, by the controller's C($USER), C($LOGNAME), C($USERNAME), else C(root).
  - "Invalid files fail with one line naming the file and the key: not JSON, empty or missing
    C(node_dict), a key given twice, C(<changeme>) or a template placeholder left in, neither key nor
    password, duplicate management or fabric addresses, C(vpc_ip) on some nodes but not on others (absent,
    empty or C(NA)), C(head_node_dict.mgmt_ip) not among the nodes, wrong types."
  - The C(racks) block (it holds switch credentials) is never turned into variables.
extends_documentation_fragment:
  - ansible.builtin.constructed
  - ansible.builtin.inventory_cache
options:
  plugin:
    description: Marks a YAML source file as this plugin's.
    required: true
    choices: ["aorta.cluster.cluster_json"]
    type: str
  path:
    description:
      - The cluster file a YAML source file points at; a relative path is taken from the source
        file's directory. Not used when the cluster file itself is the source.
      - The environment variable lets an AWX credential supply the file (its injector writes the file
        and sets the variable to its path).
    type: str
    env:
      - name: AORTA_CLUSTER_FILE
  connection_vars:
    description:
      - Set C(ansible_user) and C(ansible_ssh_private_key_file) or C(ansible_password) from the file.
      - Set to V(false) where another source supplies them, for example an AWX Machine credential
        (a workstation key path in the file does not exist inside an execution environment).
    type: bool
    default: true
    env:
      - name: AORTA_CLUSTER_JSON_CONNECTION_VARS
notes:
  - Values from the cluster file are data, never templated.
  - "A healthy run prints no line per node and task: unless the environment or the ansible.cfg in use
    sets them, parsing a cluster file sets C(ANSIBLE_DISPLAY_OK_HOSTS) and C(ANSIBLE_DISPLAY_SKIPPED_HOSTS)
    to false for the rest of the command (the stdout callback reads them after the inventory), so an
    installed collection prints what the checkout prints. Set either to true to see every result."
"""

EXAMPLES = r"""
# Pass the CVS cluster file itself (from the collection root, whose ansible.cfg enables the plugin):
#   ansible-inventory -i cluster.json --graph
#   ansible-playbook aorta_multinode.yml -i cluster.json
---
# AWX inventory source or any YAML source file, e.g. inventories/prod/aorta.cluster_json.yml
plugin: aorta.cluster.cluster_json
path: cluster.json
---
# AWX: the cluster file comes from a credential whose injector sets AORTA_CLUSTER_FILE
# (see docs/awx.md); the source file then names no path.
plugin: aorta.cluster.cluster_json
connection_vars: false
---
# Same file, connection from an AWX Machine credential, plus a group per rack
plugin: aorta.cluster.cluster_json
path: /runner/project/inventories/prod/cluster.json
connection_vars: false
keyed_groups:
  - key: aorta_rack_id
    prefix: rack
"""

import os

from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster import _cluster_file
from ansible_collections.aorta.cluster.plugins.plugin_utils.watch import _console


class ClusterFileRejected(SystemExit):
    """A cluster file this plugin claims and rejects ends the command with its one line (exit 1).

    Raised as an AnsibleParserError, the inventory manager would try every other plugin on the file
    and print each failure with its cause: this plugin's line twice, then the ini plugin's unrelated
    "Invalid host pattern '_user_comment:'". Python prints a SystemExit's text alone to stderr."""


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "aorta.cluster.cluster_json"

    def verify_file(self, path):
        if not super().verify_file(path):
            return False
        if path.endswith((".yml", ".yaml")):
            return self._is_own_yaml_source(path)
        # Claim every *cluster.json even when broken, so a truncated cluster file gets this
        # plugin's error instead of falling through to plugins that read it as zero hosts.
        return _cluster_file.looks_like_cluster_file(path)

    def _is_own_yaml_source(self, path):
        """True for a YAML file whose top-level ``plugin:`` names this plugin (cheap text test)."""
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                head = handle.read(4096)
        except OSError:
            return False
        wanted = f"plugin:{self.NAME}"
        for line in head.splitlines():
            text = line.split("#", 1)[0].strip().replace(" ", "").replace("'", "").replace('"', "")
            if text == wanted:
                return True
        return False

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        # Before the stdout callback loads: a healthy run prints no line per node and task, from an
        # installed collection as from the checkout, unless the user's configuration says otherwise.
        _console.apply()
        if path.endswith((".yml", ".yaml")):
            self._read_config_data(path)
            cluster_path = self.get_option("path")
            if not cluster_path:
                raise ClusterFileRejected(
                    f"{path}: path: not set (nor AORTA_CLUSTER_FILE); point it at the cluster.json file"
                )
            # Relative to the source file, so an AWX project or a checkout works from any cwd.
            cluster_path = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.expanduser(cluster_path))
        else:
            # The cluster file is the source itself: no YAML options, so apply defaults and env.
            self.set_options(direct={"plugin": self.NAME})
            if self.get_option("cache"):
                self.load_cache_plugin()
            cluster_path = path

        cache_key = self.get_cache_key(cluster_path)
        use_cache = self.get_option("cache") and cache
        cluster = None
        if use_cache:
            try:
                cluster = self._cache[cache_key]
            except KeyError:
                cluster = None
        if cluster is None:
            try:
                cluster = _cluster_file.read(cluster_path)
            except _cluster_file.ClusterFileError as exc:
                # One line: the file, the key path, what to do. No traceback, no other plugin's try.
                raise ClusterFileRejected(str(exc)) from None
            if self.get_option("cache"):
                self._cache[cache_key] = cluster
        # What the file leaves to a default (no node has a vpc_ip): one warning per file, on stderr
        # (ansible-inventory --list keeps stdout for its JSON); Ansible shows a repeated one once.
        for note in cluster.notes:
            self.display.warning(note)
        self._populate(cluster)

    def _populate(self, cluster):
        inventory = self.inventory
        for group in (_cluster_file.GROUP_ALL, _cluster_file.GROUP_HEAD, _cluster_file.GROUP_WORKERS):
            inventory.add_group(group)
        # Cluster-file values are data: wrap_var keeps them from ever being templated.
        for name, value in _cluster_file.group_vars(cluster).items():
            inventory.set_variable(_cluster_file.GROUP_ALL, name, wrap_var(value))

        strict = self.get_option("strict")
        for record in _cluster_file.host_records(cluster, self.get_option("connection_vars")):
            host = record["name"]
            inventory.add_host(host, group=_cluster_file.GROUP_ALL)
            inventory.add_child(record["groups"][1], host)
            for name, value in record["vars"].items():
                inventory.set_variable(host, name, wrap_var(value))
            all_vars = inventory.get_host(host).get_vars()
            self._set_composite_vars(self.get_option("compose"), all_vars, host, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), all_vars, host, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), all_vars, host, strict=strict)
