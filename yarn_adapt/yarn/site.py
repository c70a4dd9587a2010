"""Find the RM and JobHistory web addresses in a Hadoop configuration directory
(``yarn-site.xml``, ``mapred-site.xml``), as an operator's client tools do.

Resolution follows YarnConfiguration: with ``yarn.resourcemanager.ha.enabled`` each id
in ``yarn.resourcemanager.ha.rm-ids`` has ``yarn.resourcemanager.webapp[.https].address.<id>``
(or ``yarn.resourcemanager.hostname.<id>`` with the default port); without HA,
``yarn.resourcemanager.webapp.address`` or ``yarn.resourcemanager.hostname``:8088.
``yarn.http.policy=HTTPS_ONLY`` selects the https addresses (default port 8090).
"""

from __future__ import annotations

import os
from pathlib import Path

from lxml import etree

from yarn_adapt.errors import ConfigFileError

RM_HTTP_PORT = 8088
RM_HTTPS_PORT = 8090
JHS_HTTP_PORT = 19888
JHS_HTTPS_PORT = 19890


def hadoop_conf_dir() -> Path | None:
    for variable in ("YARN_CONF_DIR", "HADOOP_CONF_DIR"):
        value = os.environ.get(variable)
        if value and Path(value).is_dir():
            return Path(value)
    return None


def read_properties(path: Path) -> dict[str, str]:
    """``name -> value`` of a Hadoop configuration file; {} when it does not exist."""
    if not path.exists():
        return {}
    try:
        root = etree.parse(str(path), etree.XMLParser(resolve_entities=False)).getroot()
    except (OSError, etree.XMLSyntaxError) as exc:
        raise ConfigFileError(str(path), f"not readable as XML: {exc}") from exc
    properties: dict[str, str] = {}
    for prop in root.iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name:
            properties[name.strip()] = (value or "").strip()
    return properties


def rm_web_addresses(conf_dir: Path) -> list[str]:
    site = read_properties(conf_dir / "yarn-site.xml")
    https = site.get("yarn.http.policy", "HTTP_ONLY").upper() == "HTTPS_ONLY"
    scheme, key, port = (
        ("https", "webapp.https.address", RM_HTTPS_PORT)
        if https
        else ("http", "webapp.address", RM_HTTP_PORT)
    )
    if site.get("yarn.resourcemanager.ha.enabled", "false").lower() == "true":
        ids = [
            i.strip()
            for i in site.get("yarn.resourcemanager.ha.rm-ids", "").split(",")
            if i.strip()
        ]
        return [
            _address(
                site,
                scheme,
                f"yarn.resourcemanager.{key}.{i}",
                f"yarn.resourcemanager.hostname.{i}",
                port,
            )
            for i in ids
        ]
    return [
        _address(site, scheme, f"yarn.resourcemanager.{key}", "yarn.resourcemanager.hostname", port)
    ]


def jobhistory_web_address(conf_dir: Path) -> str | None:
    site = read_properties(conf_dir / "mapred-site.xml")
    https = site.get("mapreduce.jobhistory.http.policy", "HTTP_ONLY").upper() == "HTTPS_ONLY"
    key = (
        "mapreduce.jobhistory.webapp.https.address"
        if https
        else "mapreduce.jobhistory.webapp.address"
    )
    address = site.get(key)
    if not address:
        return None
    return f"{'https' if https else 'http'}://{address}"


def scheduler_file_in(conf_dir: Path) -> Path:
    """The scheduler file the RM of ``conf_dir`` reads: the Fair Scheduler's
    allocation file when yarn-site selects it, else capacity-scheduler.xml."""
    site = read_properties(conf_dir / "yarn-site.xml")
    if "FairScheduler" in site.get("yarn.resourcemanager.scheduler.class", ""):
        configured = site.get("yarn.scheduler.fair.allocation.file", "fair-scheduler.xml")
        path = Path(configured.removeprefix("file://"))
        return path if path.is_absolute() else conf_dir / path
    return conf_dir / "capacity-scheduler.xml"


def _address(site: dict[str, str], scheme: str, address_key: str, host_key: str, port: int) -> str:
    address = site.get(address_key)
    if address:
        return f"{scheme}://{address}"
    host = site.get(host_key, "0.0.0.0")
    return f"{scheme}://{host}:{port}"
