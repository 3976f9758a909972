# SPDX-License-Identifier: GPL-3.0-or-later
"""The cluster.json reader: what it accepts, and the one line it gives for what it refuses."""

from __future__ import annotations

import json

import pytest

from ansible_collections.aorta.cluster.plugins.plugin_utils.cluster import _cluster_file as cf


def good(**overrides):
    data = {
        "username": "{user-id}",
        "priv_key_file": "/home/{user-id}/.ssh/id_ed25519",
        "head_node_dict": {"mgmt_ip": "node-a"},
        "env_vars": {"PATH": "/opt/rocm/bin:$PATH"},
        "node_dict": {
            "node-a": {"bmc_ip": "NA", "vpc_ip": "10.1.0.1"},
            "node-b": {"bmc_ip": "10.9.0.2", "vpc_ip": "10.1.0.2", "rack_id": "r1", "gpu_sku": "MI300X"},
        },
    }
    data.update(overrides)
    return data


def reject(data_or_text, path="c/cluster.json"):
    text = data_or_text if isinstance(data_or_text, (str, bytes)) else json.dumps(data_or_text)
    with pytest.raises(cf.ClusterFileError) as info:
        cf.parse(cf.loads(text, path), path, user="alice")
    message = str(info.value)
    assert message.startswith(path + ": "), message
    assert "\n" not in message
    assert "Traceback" not in message
    return info.value


def test_good_file_keeps_order_and_resolves_user_id():
    cluster = cf.parse(good(), "c.json", user="alice")
    assert [n.name for n in cluster.nodes] == ["node-a", "node-b"]
    assert [n.rank for n in cluster.nodes] == [0, 1]
    assert cluster.head.name == "node-a"
    assert [n.name for n in cluster.workers] == ["node-b"]
    assert cluster.username == "alice"
    assert cluster.priv_key_file == "/home/alice/.ssh/id_ed25519"
    assert cluster.nodes[0].bmc_ip is None
    assert cluster.nodes[1].bmc_ip == "10.9.0.2"
    assert cluster.nodes[1].rack_id == "r1"
    assert cluster.nodes[1].extra == {"gpu_sku": "MI300X"}
    assert cluster.env_vars == {"PATH": "/opt/rocm/bin:$PATH"}


def test_key_order_is_rank_order_even_when_not_sorted():
    nodes = {f"n{i:02d}": {"vpc_ip": f"10.0.0.{i}"} for i in (7, 3, 11, 1)}
    cluster = cf.parse(good(node_dict=nodes, head_node_dict={"mgmt_ip": "n07"}), "c.json", user="u")
    assert [n.name for n in cluster.nodes] == ["n07", "n03", "n11", "n01"]


@pytest.mark.parametrize("vpc", ["absent", None, "", "  ", "NA", "n/a"])
def test_vpc_ip_falls_back_to_the_key_with_one_note_when_no_node_has_one(vpc):
    entry = {} if vpc == "absent" else {"vpc_ip": vpc}
    nodes = {f"h{i}": dict(entry) for i in range(1, 1001)}
    cluster = cf.parse(good(node_dict=nodes, head_node_dict={"mgmt_ip": "h1"}), "c.json", user="u")
    assert [n.vpc_ip for n in cluster.nodes[:2]] == ["h1", "h2"]
    # One line for the whole file, whatever the node count, naming the file and the key.
    (note,) = cluster.notes
    assert note.startswith("c.json: node_dict: no node has a vpc_ip, so the management network")
    assert "carries the fabric traffic" in note and "\n" not in note and "h1" not in note


def test_no_note_when_every_node_has_a_vpc_ip(fixtures_dir):
    assert cf.parse(good(), "c.json", user="u").notes == []
    for name in ("cluster.json", "cluster_container.json", "atom_cluster.json", "cluster_rack.json"):
        assert cf.read(str(fixtures_dir / "cluster_files" / "filled" / name), user="u").notes == []


def test_some_nodes_without_vpc_ip_are_refused_naming_them():
    nodes = {f"10.0.0.{i}": {"vpc_ip": f"10.1.0.{i}"} for i in range(1, 9)}
    nodes["10.0.0.3"] = {"bmc_ip": "NA"}
    nodes["10.0.0.4"] = {"vpc_ip": ""}
    error = reject(good(node_dict=nodes, head_node_dict={"mgmt_ip": "10.0.0.1"}))
    assert str(error) == (
        "c/cluster.json: node_dict: vpc_ip missing on 10.0.0.3, 10.0.0.4 (the other 6 nodes have one); "
        "give every node its fabric address or none"
    )
    # Only the head has one: "the other 1 node has one".
    error = reject(
        good(node_dict={"a": {"vpc_ip": "10.1.0.1"}, "b": {"vpc_ip": "NA"}}, head_node_dict={"mgmt_ip": "a"})
    )
    assert error.key == "node_dict" and error.problem.startswith("vpc_ip missing on b (the other 1 node has one);")


def test_the_mixed_vpc_ip_line_stays_short_at_1000_nodes():
    nodes = {f"10.0.{i // 250}.{i % 250 + 1}": {"vpc_ip": f"10.1.{i // 250}.{i % 250 + 1}"} for i in range(1000)}
    for name in list(nodes)[500:]:
        nodes[name] = {}
    error = reject(good(node_dict=nodes, head_node_dict={"mgmt_ip": "10.0.0.1"}))
    assert error.problem == (
        "vpc_ip missing on 10.0.2.1, 10.0.2.2, 10.0.2.3, 10.0.2.4, 10.0.2.5 and 495 more "
        "(the other 500 nodes have one); give every node its fabric address or none"
    )
    assert len(str(error)) < 300


def test_a_placeholder_vpc_ip_is_still_named_as_a_placeholder_in_a_mixed_file():
    nodes = {"a": {"vpc_ip": "10.1.0.1"}, "b": {"vpc_ip": "{vpc-ip}"}, "c": {}}
    error = reject(good(node_dict=nodes, head_node_dict={"mgmt_ip": "a"}))
    assert (error.key, "placeholder" in error.problem) == ("node_dict.b.vpc_ip", True)


def test_password_alone_is_enough():
    data = good(password="s3cret")
    del data["priv_key_file"]
    cluster = cf.parse(data, "c.json", user="u")
    assert cluster.password == "s3cret"
    assert cluster.priv_key_file is None


@pytest.mark.parametrize(
    "environ,expected",
    [
        ({"USER": "a", "LOGNAME": "b", "USERNAME": "c"}, "a"),
        ({"LOGNAME": "b", "USERNAME": "c"}, "b"),
        ({"USERNAME": "c"}, "c"),
        ({}, "root"),
    ],
)
def test_user_id_source_order_matches_cvs(environ, expected):
    assert cf.controller_user(environ) == expected


# At least 20 ways a cluster file goes wrong; each must name the key path that is wrong.
BAD_TEXT = [
    ("", "", "empty"),
    ("   \n", "", "empty"),
    ('{"username": "u", "node_dict": {', "", "not valid JSON"),
    ("[1, 2]", "", "JSON array"),
    ('"just a string"', "", "JSON string"),
    ('{"username": "u", "priv_key_file": "/k", "node_dict": {"a": {"vpc_ip": NaN}}}', "", "NaN"),
    (
        '{"username": "u", "priv_key_file": "/k", "node_dict": {"a": {"vpc_ip": "1"}, "a": {"vpc_ip": "2"}}}',
        "node_dict.a",
        "more than once",
    ),
    ('{"username": "u", "username": "v", "priv_key_file": "/k", "node_dict": {"a": {}}}', "username", "more than once"),
    (b"\xff\xfe{}", "", "UTF-8"),
]


@pytest.mark.parametrize("text,key,words", BAD_TEXT)
def test_rejects_bad_text(text, key, words):
    error = reject(text)
    assert error.key == key
    assert words in error.problem


def _without(key):
    data = good()
    del data[key]
    return data


BAD_DATA = [
    (_without("node_dict"), "node_dict", "missing"),
    (good(node_dict={}), "node_dict", "empty"),
    (good(node_dict=["a", "b"]), "node_dict", "must be an object"),
    (good(node_dict={"a": "10.0.0.1"}), "node_dict.a", "must be an object"),
    (good(node_dict={"a": None}), "node_dict.a", "must be an object"),
    (good(username="<changeme>"), "username", "<changeme>"),
    (good(node_dict={"<changeme>": {"vpc_ip": "1.2.3.4"}}), "node_dict.<changeme>", "<changeme>"),
    (good(env_vars={"X": ["<changeme>"]}), "env_vars.X[0]", "<changeme>"),
    (
        good(node_dict={"{xx.xx.xx.xx|hostname}": {"vpc_ip": "1.1.1.1"}}),
        "node_dict.{xx.xx.xx.xx|hostname}",
        "placeholder",
    ),
    (good(head_node_dict={"mgmt_ip": "{head-node-ip}"}), "head_node_dict.mgmt_ip", "placeholder"),
    (good(username=7), "username", "must be a string"),
    (good(username=""), "username", "empty"),
    (_without("username"), "username", "must be a string"),
    ({k: v for k, v in good().items() if k != "priv_key_file"}, "priv_key_file", "neither"),
    (good(priv_key_file=["/a"]), "priv_key_file", "must be a string"),
    (good(node_dict={"a": {"vpc_ip": "10.0.0.1"}, "A": {"vpc_ip": "10.0.0.2"}}), "node_dict.A", "same management"),
    (good(node_dict={"a": {"vpc_ip": "10.0.0.1"}, "b": {"vpc_ip": "10.0.0.1"}}), "node_dict.b.vpc_ip", "also used"),
    (good(node_dict={"a": {"vpc_ip": "10.0.0.1"}, "b": {"vpc_ip": " 10.0.0.1 "}}), "node_dict.b.vpc_ip", "also used"),
    (good(node_dict={"a": {}, "b": {"vpc_ip": "a"}}), "node_dict", "vpc_ip missing on a (the other 1 node"),
    (good(node_dict={"a": {"vpc_ip": "10.0.0.1"}, "b": {"vpc_ip": ""}}), "node_dict", "vpc_ip missing on b"),
    (good(node_dict={"a": {"vpc_ip": 10}}), "node_dict.a.vpc_ip", "must be a string"),
    (good(node_dict={"a": {"bmc_ip": False}}), "node_dict.a.bmc_ip", "must be a string"),
    (good(head_node_dict={"mgmt_ip": "node-z"}), "head_node_dict.mgmt_ip", "not one of the node_dict keys"),
    (good(head_node_dict={}), "head_node_dict.mgmt_ip", "must be a string"),
    (good(head_node_dict="node-a"), "head_node_dict", "must be an object"),
    (good(env_vars=["PATH=/x"]), "env_vars", "must be an object"),
    (good(orchestrator="k8s"), "orchestrator", "must be one of"),
    (good(container="rocm/cvs"), "container", "must be an object"),
    (
        good(node_dict={"a": {"ansible_ssh_common_args": "-o ProxyCommand=x"}}),
        "node_dict.a.ansible_ssh_common_args",
        "reserved",
    ),
    (good(node_dict={" ": {"vpc_ip": "1.1.1.1"}}), "node_dict. ", "empty"),
]


@pytest.mark.parametrize("data,key,words", BAD_DATA)
def test_rejects_bad_data(data, key, words):
    error = reject(data)
    assert error.key == key
    assert words in error.problem


def test_at_least_twenty_bad_cases_are_covered():
    assert len(BAD_TEXT) + len(BAD_DATA) >= 20


def test_head_node_may_name_the_fabric_address():
    cluster = cf.parse(good(head_node_dict={"mgmt_ip": "10.1.0.1"}), "c.json", user="u")
    assert cluster.head_mgmt_ip == "10.1.0.1"


def test_comment_keys_and_unknown_blocks_are_accepted():
    data = good(_comment="{xx} is fine in a comment", racks={"switch_ssh_password": "pw"})
    data["node_dict"]["node-a"]["_note"] = "ignored"
    cluster = cf.parse(data, "c.json", user="u")
    assert "_note" not in cluster.head.extra


def test_shell_variables_in_env_vars_are_not_placeholders():
    cluster = cf.parse(good(env_vars={"LD_LIBRARY_PATH": "${ROCM}/lib:$LD_LIBRARY_PATH"}), "c.json", user="u")
    assert cluster.env_vars["LD_LIBRARY_PATH"] == "${ROCM}/lib:$LD_LIBRARY_PATH"


def test_unreadable_file_names_the_path(tmp_path):
    missing = tmp_path / "nope" / "cluster.json"
    with pytest.raises(cf.ClusterFileError, match="cannot read"):
        cf.read(str(missing))


@pytest.mark.parametrize("name", ["cluster.json", "cluster_container.json", "atom_cluster.json", "cluster_rack.json"])
def test_cvs_templates_are_rejected_and_filled_files_accepted(name, fixtures_dir):
    fixtures = fixtures_dir / "cluster_files"
    with pytest.raises(cf.ClusterFileError) as info:
        cf.read(str(fixtures / "cvs-templates" / name), user="u")
    assert "placeholder" in info.value.problem or "more than once" in info.value.problem
    cluster = cf.read(str(fixtures / "filled" / name), user="u")
    assert cluster.nodes and cluster.head.rank == 0


def test_claims_cluster_files_by_name_or_content(tmp_path):
    broken = tmp_path / "prod-cluster.json"
    broken.write_text('{"node_dict": {')
    assert cf.looks_like_cluster_file(str(broken))
    other = tmp_path / "hosts.json"
    other.write_text('{"all": {"hosts": {}}}')
    assert not cf.looks_like_cluster_file(str(other))
    named_otherwise = tmp_path / "gpus.json"
    named_otherwise.write_text(json.dumps(good()))
    assert cf.looks_like_cluster_file(str(named_otherwise))
    assert not cf.looks_like_cluster_file(str(tmp_path / "inventory.yml"))


def test_a_job_with_only_some_of_the_nodes_is_refused_naming_k_of_n():
    assert cf.partial_cluster(3, 3) == ""
    assert cf.partial_cluster(6, 3) == ""  # two files in one inventory: the rank check says it
    assert cf.partial_cluster(2, None) == ""  # an inventory without the count
    message = cf.partial_cluster(2, "3")
    assert message.startswith("2 of 3 nodes: a --limit or an AWX sliced job.")
    assert "Job Slicing to 1" in message and "without --limit" in message


def test_the_group_variables_carry_the_node_count(fixtures_dir):
    cluster = cf.read(str(fixtures_dir / "cluster_files" / "filled" / "cluster.json"))
    assert cf.group_vars(cluster)["aorta_cluster_nodes"] == len(cluster.nodes)


def test_healthy_cluster_drops_the_excluded_nodes_and_the_racks(tmp_path):
    source = {
        "username": "me",
        "priv_key_file": "/home/me/.ssh/id",
        "head_node_dict": {"mgmt_ip": "10.0.0.1"},
        "node_dict": {f"10.0.0.{i}": {"vpc_ip": f"192.168.0.{i}", "bmc_ip": "NA"} for i in range(1, 5)},
        "racks": {"rack1": {"switch": {"user": "admin", "password": "s3cret"}}},
        "leaf_switch_creds": {"password": "s3cret"},
    }
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(source))
    text = cf.healthy_cluster(str(path), ["10.0.0.1", "10.0.0.3"])
    healthy = json.loads(text)
    assert list(healthy["node_dict"]) == ["10.0.0.2", "10.0.0.4"]
    assert healthy["head_node_dict"] == {"mgmt_ip": "10.0.0.2"}  # the excluded head hands over
    assert "s3cret" not in text and "racks" not in healthy
    written = tmp_path / "healthy.cluster.json"
    written.write_text(text)
    cluster = cf.read(str(written))
    assert [n.name for n in cluster.nodes] == ["10.0.0.2", "10.0.0.4"] and cluster.head.vpc_ip == "192.168.0.2"
    assert json.loads(cf.healthy_cluster(str(path), []))["node_dict"] == source["node_dict"]
