"""A region of every AWS partition is a region to Spillway: the interrupt function reads its notices,
a drain finds its nodes' region from their zone, and the scale-up steps take its groups.

The forms are those botocore's endpoints.json gives each partition (``regionRegex``): ``aws`` (two
letters), ``aws-us-gov`` (``us-gov-``), ``aws-cn``, the isolated ``aws-iso*`` ones (``us-iso-``,
``us-isob-``, ``us-isof-``, ``eu-isoe-``) and ``aws-eusc``, the AWS European Sovereign Cloud
(``^eusc\\-(de)\\-\\w+\\-\\d+$``, region ``eusc-de-east-1``). Its four-letter prefix matched no region
pattern of Spillway's: there a Spot warning was malformed (dead-letter queue, no drain), a drain
refused its node as in no known region, and a scale-up step refused its own input.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from spillway.act.drain import region_of
from spillway.act.interrupt import parse_notice
from spillway.model.k8s import Node
from spillway.model.scale import Region

ROOT = Path(__file__).resolve().parents[2]
# one region of each partition, as botocore's endpoints.json lists them
REGIONS = [
    "us-east-1",
    "us-gov-west-1",
    "cn-northwest-1",
    "us-iso-east-1",
    "us-isob-east-1",
    "us-isof-south-1",
    "eu-isoe-west-1",
    "eusc-de-east-1",
]


@pytest.mark.parametrize("region", REGIONS)
def test_a_spot_warning_of_each_partitions_region_is_read_with_its_region(region: str) -> None:
    doc = json.loads((ROOT / "events" / "interrupt-spot-warning.json").read_text())
    doc["region"] = region
    assert parse_notice(json.dumps(doc)).region == region


@pytest.mark.parametrize("region", REGIONS)
def test_a_drain_reads_a_nodes_region_from_its_zone_in_each_partition(region: str) -> None:
    node = Node.model_validate(
        {"metadata": {"name": "n"}, "spec": {"providerID": f"aws:///{region}a/i-0123456789abcdef0"}}
    )
    assert region_of(node) == region


@pytest.mark.parametrize("region", REGIONS)
def test_a_scale_up_step_takes_a_group_of_each_partitions_region(region: str) -> None:
    assert TypeAdapter(Region).validate_python(region) == region
