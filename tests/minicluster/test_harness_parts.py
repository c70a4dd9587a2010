"""The harness's own pieces, without a cluster: config text, queue sets, process sweeping."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from lxml import etree

from yarn_adapt.minicluster import MiniClusterSpec
from yarn_adapt.minicluster.cluster import port_clash
from yarn_adapt.minicluster.confgen import site_xml, yarn_site
from yarn_adapt.minicluster.ha import java_failure
from yarn_adapt.minicluster.jars import HadoopJars, hadoop_version, java_major
from yarn_adapt.minicluster.layout import ClusterLayout, Ports
from yarn_adapt.minicluster.processes import MARKER_ENV, kill_marked_processes
from yarn_adapt.minicluster.schedconf import capacity_queues, stop_queues_body
from yarn_adapt.minicluster.spec import DEFAULT_CAPACITY_XML, DEFAULT_FAIR_XML


def parse_properties(text: str) -> dict[str, str]:
    root = etree.fromstring(text.encode())
    return {p.findtext("name", ""): p.findtext("value", "") for p in root.iter("property")}


def test_site_xml_round_trips_values_that_need_escaping() -> None:
    properties = {"a.b": "x<y & z>w", "empty": "", "path": "/tmp/conf,/lib/*"}
    assert parse_properties(site_xml(properties)) == properties


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({}, {"root"}),
        (
            {"yarn.scheduler.capacity.root.queues": "default, a,b"},
            {"root", "root.default", "root.a", "root.b"},
        ),
        (
            {
                "yarn.scheduler.capacity.root.queues": "eng",
                "yarn.scheduler.capacity.root.eng.queues": "dev,prod",
                "yarn.scheduler.capacity.root.other.queues": "orphan",
            },
            {"root", "root.eng", "root.eng.dev", "root.eng.prod"},
        ),
    ],
)
def test_capacity_queues_follows_the_tree_from_root(
    properties: dict[str, str], expected: set[str]
) -> None:
    assert capacity_queues(properties) == expected


def test_default_capacity_xml_has_three_leaves_summing_to_100() -> None:
    properties = parse_properties(DEFAULT_CAPACITY_XML)
    leaves = capacity_queues(properties) - {"root"}
    assert leaves == {"root.default", "root.a", "root.b"}
    total = sum(float(properties[f"yarn.scheduler.capacity.{q}.capacity"]) for q in leaves)
    assert total == 100.0


def test_default_fair_xml_declares_the_same_leaves() -> None:
    names = {q.get("name") for q in etree.fromstring(DEFAULT_FAIR_XML.encode()).iter("queue")}
    assert names == {"default", "a", "b"}


def test_stop_queues_body_stops_each_queue_once() -> None:
    body = etree.fromstring(stop_queues_body(["root.c", "root.b"]).encode())
    updates = body.findall("update-queue")
    assert [u.findtext("queue-name") for u in updates] == ["root.b", "root.c"]
    assert {u.findtext("params/entry/value") for u in updates} == {"STOPPED"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scheduler": "fifo"}, "scheduler must be"),
        ({"conf_store": "zk"}, "conf_store must be"),
        ({"scheduler": "fair", "conf_store": "memory"}, "needs the capacity scheduler"),
        ({"nodemanagers": 0}, "at least one NodeManager"),
        ({"nm_memory_mb": 64}, "at least one NodeManager"),
    ],
)
def test_spec_rejects_impossible_clusters(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MiniClusterSpec(**kwargs)  # type: ignore[arg-type]


def test_spec_is_hashable_and_freezes_extra_properties() -> None:
    extra = {"yarn.resourcemanager.am.max-attempts": "2"}
    spec = MiniClusterSpec(yarn_site=extra)
    extra["other"] = "x"
    assert dict(spec.yarn_site) == {"yarn.resourcemanager.am.max-attempts": "2"}
    assert hash(spec) == hash(MiniClusterSpec(yarn_site={"anything": "else"}))


def test_extra_yarn_site_properties_override_the_generated_ones(tmp_path: Path) -> None:
    spec = MiniClusterSpec(
        scheduler="fair", yarn_site={"yarn.scheduler.fair.assignmultiple": "false"}
    )
    layout = ClusterLayout(tmp_path)
    jars = HadoopJars(version="3.4.3", lib_dir=tmp_path / "lib")
    properties = yarn_site(spec, layout, Ports.pick(), jars)
    assert properties["yarn.scheduler.fair.assignmultiple"] == "false"
    assert properties["yarn.scheduler.fair.allocation.file"] == str(
        layout.conf_dir / "fair-scheduler.xml"
    )
    assert properties["yarn.application.classpath"] == f"{layout.conf_dir},{tmp_path}/lib/*"


def test_memory_store_is_only_set_for_the_memory_variant(tmp_path: Path) -> None:
    layout, jars = ClusterLayout(tmp_path), HadoopJars("3.4.3", tmp_path)
    key = "yarn.scheduler.configuration.store.class"
    memory = yarn_site(MiniClusterSpec(conf_store="memory"), layout, Ports.pick(), jars)
    file = yarn_site(MiniClusterSpec(), layout, Ports.pick(), jars)
    assert memory[key] == "memory"
    assert key not in file


def test_picked_ports_are_distinct() -> None:
    ports = Ports.pick()
    assert len(set(vars(ports).values())) == len(vars(ports))


@pytest.mark.parametrize(
    ("release", "major"),
    [('JAVA_VERSION="17.0.15"', 17), ('JAVA_VERSION="1.8.0_402"', 8), ('JAVA_VERSION="25"', 25),
     ("IMPLEMENTOR=nobody", None)],
)  # fmt: skip
def test_java_major_reads_the_release_file(tmp_path: Path, release: str, major: int | None) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "java").write_text("")
    (tmp_path / "release").write_text(release + "\n")
    assert java_major(tmp_path) == major


def test_hadoop_version_comes_from_the_pom() -> None:
    pom = Path(__file__).resolve().parents[1] / "hadoop" / "pom.xml"
    assert hadoop_version(pom).startswith("3.4.")


def test_sweep_kills_processes_working_in_the_cluster_dir(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    (root / "container").mkdir(parents=True)
    # Like a NodeManager container: its own session, no marker, cwd inside the cluster.
    inside = subprocess.Popen(["sleep", "60"], cwd=root / "container", start_new_session=True)
    outside = subprocess.Popen(["sleep", "60"], cwd=tmp_path, start_new_session=True)
    try:
        assert kill_marked_processes(root) == 1
        assert inside.wait(timeout=5) == -9
        time.sleep(0.1)
        assert outside.poll() is None
    finally:
        outside.kill()
        outside.wait()
        inside.kill()
        inside.wait()


def test_sweep_kills_processes_carrying_the_marker(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    root.mkdir()
    env = {**os.environ, "YARN_ADAPT_MINICLUSTER": str(root)}
    marked = subprocess.Popen(["sleep", "60"], cwd=tmp_path, env=env, start_new_session=True)
    try:
        # Popen returns when the exec closed its pipe, which the kernel does before it
        # lays out the new environment: until then /proc/PID/environ reads empty
        # (CI r18). The sweep is for a cluster's running processes, not one mid-exec.
        marker = f"{MARKER_ENV}={root}".encode()
        environ = Path("/proc") / str(marked.pid) / "environ"
        deadline = time.monotonic() + 10
        while marker not in environ.read_bytes().split(b"\0") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert kill_marked_processes(root) == 1
        assert marked.wait(timeout=5) == -9
    finally:
        marked.kill()
        marked.wait()


def test_a_failed_java_command_is_told_by_its_exceptions_not_its_stack_tail() -> None:
    stderr = (
        "transitionToActive: failed\n"
        "org.apache.hadoop.ha.ServiceFailedException: RM could not transition to Active\n"
        + "\tat org.apache.hadoop.Some.frame(Some.java:1)\n"
        * 40
        + "Caused by: java.io.IOException: Mkdirs failed to create /tmp/node-attribute\n"
        "\tat org.apache.hadoop.fs.Store.init(Store.java:2)\n"
    )
    told = java_failure(stderr)
    assert told == (
        "org.apache.hadoop.ha.ServiceFailedException: RM could not transition to Active | "
        "Caused by: java.io.IOException: Mkdirs failed to create /tmp/node-attribute"
    )
    assert java_failure("no such command\n") == "no such command"


def test_a_port_taken_before_its_daemon_bound_it_is_a_clash_to_retry() -> None:
    # CI s42c: the NodeManager's web app took the ResourceManager's resource-tracker port
    # as an ephemeral one before the ResourceManager bound it, then read its own HTTP
    # answer as an RPC length
    tail = (
        "ERROR NodeStatusUpdaterImpl: Unexpected error starting NodeStatusUpdater\n"
        "org.apache.hadoop.ipc.RpcException: RPC response has a length of 1213486160 "
        "exceeds maximum data length\n"
    )
    assert port_clash(tail)
    assert port_clash("java.net.BindException: Address already in use")
    assert not port_clash("java.lang.OutOfMemoryError: Java heap space")
