"""Create DynamoDB tables from ``template.yaml``'s own resource definitions (moto, the local stack).

Tests and the local stack build their tables from the template that is deployed, so the two cannot
drift: key schema, attribute definitions, billing mode, stream, TTL, SSE and point-in-time recovery all
come from the ``AWS::DynamoDB::Table`` resources' ``Properties``.

The YAML loader accepts CloudFormation's short tags (``!Ref``, ``!Sub``, ``!GetAtt``, ...) and turns them
into the long form (``{"Ref": ...}``, ``{"Fn::Sub": ...}``); values that stay intrinsic (e.g. a tag value
``!Ref ClusterName``) are resolved from ``parameters`` when given, else left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

TABLE_TYPE = "AWS::DynamoDB::Table"


class CfnLoader(yaml.SafeLoader):
    """A safe loader that understands CloudFormation's short-form intrinsic function tags."""


def _construct_tag(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> Any:
    name = tag_suffix  # the part after "!"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    else:  # pragma: no cover - yaml has no other node kinds
        raise yaml.constructor.ConstructorError(None, None, f"unexpected node for !{name}", node.start_mark)
    if name == "Ref":
        return {"Ref": value}
    if name == "GetAtt" and isinstance(value, str):
        return {"Fn::GetAtt": value.split(".", 1)}
    if name == "Condition":
        return {"Condition": value}
    return {f"Fn::{name}": value}


CfnLoader.add_multi_constructor("!", _construct_tag)


def load_template(path: str | Path) -> dict[str, Any]:
    doc = yaml.load(Path(path).read_text(), Loader=CfnLoader)
    if not isinstance(doc, dict) or not isinstance(doc.get("Resources"), dict):
        raise ValueError(f"{path}: Resources: missing or not a mapping")
    return doc


def table_resources(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical id → Properties of every ``AWS::DynamoDB::Table``."""
    out: dict[str, dict[str, Any]] = {}
    for logical_id, resource in template["Resources"].items():
        if isinstance(resource, dict) and resource.get("Type") == TABLE_TYPE:
            out[logical_id] = dict(resource.get("Properties") or {})
    return out


def _resolve(value: Any, parameters: Mapping[str, str]) -> Any:
    """A literal, or a ``Ref`` to a known parameter; anything else intrinsic → ``None``."""
    if isinstance(value, dict):
        if set(value) == {"Ref"} and value["Ref"] in parameters:
            return parameters[value["Ref"]]
        return None
    return value


def create_table_kwargs(
    properties: Mapping[str, Any], table_name: str, parameters: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """CloudFormation table properties as ``CreateTable`` arguments (TTL and PITR are separate calls)."""
    params = parameters or {}
    kwargs: dict[str, Any] = {
        "TableName": table_name,
        "AttributeDefinitions": [dict(a) for a in properties["AttributeDefinitions"]],
        "KeySchema": [dict(k) for k in properties["KeySchema"]],
        "BillingMode": properties.get("BillingMode", "PROVISIONED"),
    }
    if "ProvisionedThroughput" in properties:
        kwargs["ProvisionedThroughput"] = {k: int(v) for k, v in properties["ProvisionedThroughput"].items()}
    for index_kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if properties.get(index_kind):
            kwargs[index_kind] = [
                {
                    k: v
                    for k, v in index.items()
                    if k in ("IndexName", "KeySchema", "Projection", "ProvisionedThroughput")
                }
                for index in properties[index_kind]
            ]
    stream = properties.get("StreamSpecification")
    if stream:
        kwargs["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    sse = properties.get("SSESpecification")
    if sse:
        spec: dict[str, Any] = {"Enabled": bool(sse.get("SSEEnabled", False))}
        if sse.get("SSEType"):
            spec["SSEType"] = sse["SSEType"]
        key_id = _resolve(sse.get("KMSMasterKeyId"), params)
        if key_id:
            spec["KMSMasterKeyId"] = key_id
        kwargs["SSESpecification"] = spec
    if "TableClass" in properties:
        kwargs["TableClass"] = properties["TableClass"]
    if "DeletionProtectionEnabled" in properties:
        kwargs["DeletionProtectionEnabled"] = bool(properties["DeletionProtectionEnabled"])
    tags = []
    for tag in properties.get("Tags") or ():
        value = _resolve(tag.get("Value"), params)
        if isinstance(value, str):
            tags.append({"Key": str(tag["Key"]), "Value": value})
    if tags:
        kwargs["Tags"] = tags
    return kwargs


def create_tables(
    template_path: str | Path,
    dynamodb_client: Any,
    names: Mapping[str, str],
    parameters: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Create the template's tables named in ``names`` (logical id → table name); returns their
    descriptions by logical id. Unknown logical ids raise ``KeyError`` naming them."""
    resources = table_resources(load_template(template_path))
    unknown = sorted(set(names) - set(resources))
    if unknown:
        raise KeyError(f"{template_path}: no AWS::DynamoDB::Table named {', '.join(unknown)}")
    out: dict[str, dict[str, Any]] = {}
    for logical_id, table_name in names.items():
        properties = resources[logical_id]
        description = dynamodb_client.create_table(**create_table_kwargs(properties, table_name, parameters))
        dynamodb_client.get_waiter("table_exists").wait(
            TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 30}
        )
        ttl = properties.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            dynamodb_client.update_time_to_live(
                TableName=table_name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
            )
        pitr = properties.get("PointInTimeRecoverySpecification")
        if pitr and pitr.get("PointInTimeRecoveryEnabled"):
            dynamodb_client.update_continuous_backups(
                TableName=table_name,
                PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
            )
        out[logical_id] = description["TableDescription"]
    return out
