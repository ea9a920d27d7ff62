#!/usr/bin/env python3
"""Build spillway's bundled EC2 instance-type catalogue.

Writes ``layers/spillway/spillway/data/instance_types.json`` in the shape that
``aws ec2 describe-instance-types`` prints (``{"InstanceTypes": [...]}``), cut
down to the keys spillway reads so the file stays small:

    InstanceType, CurrentGeneration, VCpuInfo.DefaultVCpus, MemoryInfo.SizeInMiB,
    ProcessorInfo.SupportedArchitectures,
    NetworkInfo.{MaximumNetworkInterfaces, Ipv4AddressesPerInterface,
                 NetworkCards[].{NetworkCardIndex, MaximumNetworkInterfaces}, DefaultNetworkCardIndex,
                 EfaInfo.MaximumEfaInterfaces},
    GpuInfo.{Gpus[].{Name, Manufacturer, Count, MemoryInfo.SizeInMiB}, TotalGpuMemoryInMiB},
    NeuronInfo.{NeuronDevices[].{Count, Name, CoreInfo.{Count, Version}, MemoryInfo.SizeInMiB},
                TotalNeuronDeviceMemoryInMiB}

Sources of facts
----------------
1. moto's ``moto/ec2/resources/instance_types.json[.gz]``: a snapshot of real
   ``DescribeInstanceTypes`` responses (moto is a dev dependency of this project).
   Every type of a family listed in ``FAMILIES`` that moto knows is taken, i.e. all sizes.
2. ``HAND_ADDED`` below: types that moto's snapshot lacks, typed in from AWS's
   published specifications (each entry says where its numbers come from). A hand
   entry is only used when moto has no entry of that name; moto wins otherwise.

Usage (from the repository root, with the project venv)::

    .venv/bin/python bench/tools/build_instance_catalogue.py            # (re)write the file
    .venv/bin/python bench/tools/build_instance_catalogue.py --check    # exit 1 if stale

The output is one instance type per line, sorted by InstanceType, so it diffs well.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUTPUT = REPO_ROOT / "layers" / "spillway" / "spillway" / "data" / "instance_types.json"

# Families to bundle: every size moto knows of each is included.
CPU_FAMILIES = (
    "m5", "m5a", "m6i", "m6a", "m6g", "m7i", "m7g",
    "c5", "c6i", "c6g", "c7i", "c7g",
    "r5", "r6i", "r6g", "r7i",
    "t3", "t3a",
)  # fmt: skip
# Current NVIDIA GPU families with whole GPUs. Left out on purpose: g6f and gr6f, which
# carry a *fraction* of an L4 (describe-instance-types reports Gpus[].Count == 0 plus a
# GpuPartitionSize that this cut-down schema does not keep), and g4ad (AMD GPUs).
GPU_FAMILIES = (
    "g4dn", "g5", "g5g", "g6", "g6e", "gr6", "g7", "g7e",
    "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300",
)  # fmt: skip
NEURON_FAMILIES = ("trn1", "trn1n", "inf2")
FAMILIES = CPU_FAMILIES + GPU_FAMILIES + NEURON_FAMILIES

_V100_16GIB = {"Name": "V100", "Manufacturer": "NVIDIA", "MemoryInfo": {"SizeInMiB": 16384}}


def _p3(name: str, vcpus: int, mem_gib: int, gpus: int, enis: int, ipv4_per_eni: int) -> dict[str, Any]:
    return {
        "InstanceType": name,
        "CurrentGeneration": True,
        "VCpuInfo": {"DefaultVCpus": vcpus},
        "MemoryInfo": {"SizeInMiB": mem_gib * 1024},
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},  # Intel Xeon E5-2686 v4
        "NetworkInfo": {"MaximumNetworkInterfaces": enis, "Ipv4AddressesPerInterface": ipv4_per_eni},
        "GpuInfo": {
            "Gpus": [{**_V100_16GIB, "Count": gpus}],
            "TotalGpuMemoryInMiB": gpus * 16384,
        },
    }


# Types moto's snapshot lacks. All numbers are AWS's published specifications:
#  * vCPUs, memory, GPU count and per-GPU memory: the Amazon EC2 P3 instance page and the
#    AWS Batch user guide's GPU instance table ("p3.2xlarge 1 GPU / 16 GiB GPU memory /
#    8 vCPU / 61 GiB", "p3.8xlarge 4 / 64 GiB / 32 / 244 GiB", "p3.16xlarge 8 / 128 GiB /
#    64 / 488 GiB"); NVIDIA Tesla V100 with 16 GiB each. GiB are converted to MiB (x1024).
#  * network interfaces and IPv4 addresses per interface: the EC2 user guide's
#    "IP addresses per network interface per instance type" table (p3.2xlarge 4 x 15,
#    p3.8xlarge 8 x 30, p3.16xlarge 8 x 30); cross-checked against AWS's EKS
#    max-pods values (ENIs * (IPs - 1) + 2 = 58, 234, 234).
#  * CurrentGeneration true, as AWS reports for the sibling p3dn.24xlarge.
# (p3dn.24xlarge itself, 96 vCPU / 786432 MiB / 8x V100 32 GiB, is in moto's data.)
HAND_ADDED: dict[str, dict[str, Any]] = {
    # AWS published specs: 8 vCPU, 61 GiB, 1x V100 16 GiB, 4 ENIs x 15 IPv4.
    "p3.2xlarge": _p3("p3.2xlarge", vcpus=8, mem_gib=61, gpus=1, enis=4, ipv4_per_eni=15),
    # AWS published specs: 32 vCPU, 244 GiB, 4x V100 16 GiB, 8 ENIs x 30 IPv4.
    "p3.8xlarge": _p3("p3.8xlarge", vcpus=32, mem_gib=244, gpus=4, enis=8, ipv4_per_eni=30),
    # AWS published specs: 64 vCPU, 488 GiB, 8x V100 16 GiB, 8 ENIs x 30 IPv4.
    "p3.16xlarge": _p3("p3.16xlarge", vcpus=64, mem_gib=488, gpus=8, enis=8, ipv4_per_eni=30),
}

# Sizes that must be present after the merge (a guard against a moto upgrade dropping
# types silently). Sizes per AWS's instance-type pages.
REQUIRED_TYPES = (
    "p3.2xlarge", "p3.8xlarge", "p3.16xlarge", "p3dn.24xlarge", "p4d.24xlarge", "p5.48xlarge",
    "g4dn.xlarge", "g4dn.12xlarge", "g4dn.metal", "g5.xlarge", "g5.48xlarge",
    "g6.xlarge", "g6.48xlarge", "g6e.xlarge", "g6e.48xlarge",
    "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge",
    "inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge",
    "m5.large", "m5.metal", "m6g.medium", "m7i.48xlarge", "c7g.medium", "r7i.metal-48xl",
    "t3.nano", "t3.2xlarge", "t3a.nano", "t3a.2xlarge",
)  # fmt: skip


def family_of(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def find_moto_data() -> Path:
    spec = importlib.util.find_spec("moto")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("moto is not installed: run `make venv` or `pip install moto`")
    resources = Path(next(iter(spec.submodule_search_locations))) / "ec2" / "resources"
    for name in ("instance_types.json", "instance_types.json.gz"):
        if (resources / name).is_file():
            return resources / name
    raise SystemExit(f"no instance_types.json[.gz] under {resources}")


def load_moto(path: Path) -> dict[str, dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    if isinstance(data, dict) and "InstanceTypes" in data:
        data = data["InstanceTypes"]
    if isinstance(data, list):
        data = {entry["InstanceType"]: entry for entry in data}
    return dict(data)


def project(entry: dict[str, Any]) -> dict[str, Any]:
    """Keep only the keys spillway reads, in a fixed order."""
    net = entry["NetworkInfo"]
    out: dict[str, Any] = {
        "InstanceType": entry["InstanceType"],
        "CurrentGeneration": bool(entry["CurrentGeneration"]),
        "VCpuInfo": {"DefaultVCpus": entry["VCpuInfo"]["DefaultVCpus"]},
        "MemoryInfo": {"SizeInMiB": entry["MemoryInfo"]["SizeInMiB"]},
        "ProcessorInfo": {"SupportedArchitectures": list(entry["ProcessorInfo"]["SupportedArchitectures"])},
        "NetworkInfo": {
            "MaximumNetworkInterfaces": net["MaximumNetworkInterfaces"],
            "Ipv4AddressesPerInterface": net["Ipv4AddressesPerInterface"],
        },
    }
    # A type with several network cards (p4d, p5, g6e.24xlarge and up, trn1.32xlarge...) gives pods the
    # interfaces of its default card only (EKS's eni-max-pods.txt): keep the cards, or max pods counts all.
    cards = net.get("NetworkCards") or []
    if len(cards) > 1:
        out["NetworkInfo"]["NetworkCards"] = [
            {
                "NetworkCardIndex": c["NetworkCardIndex"],
                "MaximumNetworkInterfaces": c["MaximumNetworkInterfaces"],
            }
            for c in cards
        ]
        out["NetworkInfo"]["DefaultNetworkCardIndex"] = net.get("DefaultNetworkCardIndex", 0)
    # A type that supports EFA: how many EFA interfaces (one per network card) a launch template may
    # attach, each one ``vpc.amazonaws.com/efa`` of the EFA device plugin.
    if efa := net.get("EfaInfo"):
        out["NetworkInfo"]["EfaInfo"] = {"MaximumEfaInterfaces": efa["MaximumEfaInterfaces"]}
    if gpu := entry.get("GpuInfo"):
        out["GpuInfo"] = {
            "Gpus": [
                {
                    "Name": g["Name"],
                    "Manufacturer": g["Manufacturer"],
                    "Count": g["Count"],
                    "MemoryInfo": {"SizeInMiB": g["MemoryInfo"]["SizeInMiB"]},
                }
                for g in gpu["Gpus"]
            ],
            "TotalGpuMemoryInMiB": gpu["TotalGpuMemoryInMiB"],
        }
    if neuron := entry.get("NeuronInfo"):
        out["NeuronInfo"] = {
            "NeuronDevices": [
                {
                    "Count": d["Count"],
                    "Name": d["Name"],
                    "CoreInfo": {"Count": d["CoreInfo"]["Count"], "Version": d["CoreInfo"]["Version"]},
                    "MemoryInfo": {"SizeInMiB": d["MemoryInfo"]["SizeInMiB"]},
                }
                for d in neuron["NeuronDevices"]
            ],
            "TotalNeuronDeviceMemoryInMiB": neuron["TotalNeuronDeviceMemoryInMiB"],
        }
    return out


def build(moto: dict[str, dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    wanted = set(FAMILIES)
    merged = {name: e for name, e in moto.items() if family_of(name) in wanted}
    used_hand: list[str] = []
    for name, entry in HAND_ADDED.items():
        if name in merged:
            print(f"note: moto now has {name}; its entry wins over the hand-added one", file=sys.stderr)
            continue
        merged[name] = entry
        used_hand.append(name)
    return [project(merged[name]) for name in sorted(merged)], sorted(used_hand)


def validate(entries: list[dict[str, Any]]) -> None:
    by_name = {e["InstanceType"]: e for e in entries}
    problems: list[str] = []
    present = {family_of(n) for n in by_name}
    problems += [f"family {f} missing" for f in FAMILIES if f not in present]
    problems += [f"type {t} missing" for t in REQUIRED_TYPES if t not in by_name]
    for name, e in by_name.items():
        fam = family_of(name)
        if e["ProcessorInfo"]["SupportedArchitectures"] not in (["x86_64"], ["arm64"]):
            problems.append(f"{name}: architectures {e['ProcessorInfo']['SupportedArchitectures']}")
        if fam in GPU_FAMILIES:
            gpus = e.get("GpuInfo", {}).get("Gpus", [])
            if not gpus or any(g["Count"] < 1 or g["Manufacturer"] != "NVIDIA" for g in gpus):
                problems.append(f"{name}: no whole NVIDIA GPUs in GpuInfo")
        if fam in NEURON_FAMILIES and not e.get("NeuronInfo", {}).get("NeuronDevices"):
            problems.append(f"{name}: no NeuronInfo")
        if fam in CPU_FAMILIES and ("GpuInfo" in e or "NeuronInfo" in e):
            problems.append(f"{name}: CPU family with accelerators")
    if problems:
        raise SystemExit("catalogue check failed:\n  " + "\n  ".join(problems))


def render(entries: list[dict[str, Any]]) -> str:
    lines = ",\n".join(json.dumps(e) for e in entries)
    return '{"InstanceTypes": [\n' + lines + "\n]}\n"


def accel(e: dict[str, Any]) -> str:
    if gpu := e.get("GpuInfo"):
        return " + ".join(
            f"{g['Count']}x {g['Manufacturer']} {g['Name']} {g['MemoryInfo']['SizeInMiB']} MiB"
            for g in gpu["Gpus"]
        )
    if neuron := e.get("NeuronInfo"):
        return " + ".join(
            f"{d['Count']}x {d['Name']} ({d['CoreInfo']['Count']} cores v{d['CoreInfo']['Version']})"
            for d in neuron["NeuronDevices"]
        )
    return "none"


SANITY = (
    ("p4d.24xlarge", "A100", 8),
    ("g5.xlarge", "A10G", 1),
    ("p5.48xlarge", "H100", 8),
    ("p3.2xlarge", "V100", 1),
    ("p3.16xlarge", "V100", 8),
    ("p3dn.24xlarge", "V100", 8),
    ("g4dn.12xlarge", "T4", 4),
    ("trn1.32xlarge", "Trainium", 16),
    ("inf2.48xlarge", "Inferentia2", 12),
)


def summarise(entries: list[dict[str, Any]], path: Path, used_hand: list[str], moto_path: Path) -> None:
    by_name = {e["InstanceType"]: e for e in entries}
    families: dict[str, int] = {}
    for name in by_name:
        families[family_of(name)] = families.get(family_of(name), 0) + 1
    try:
        moto_version = importlib.metadata.version("moto")
    except importlib.metadata.PackageNotFoundError:
        moto_version = "?"
    print(f"source: moto {moto_version} ({moto_path.name}) + hand-added {', '.join(used_hand) or 'none'}")
    print(f"entries: {len(entries)}")
    print(f"families ({len(families)}): " + ", ".join(f"{f}({n})" for f, n in sorted(families.items())))
    print(f"file: {path} ({path.stat().st_size} bytes)")
    not_current = sorted({family_of(n) for n, e in by_name.items() if not e["CurrentGeneration"]})
    print("CurrentGeneration=false (as AWS reports it): " + (", ".join(not_current) or "none"))
    print("sanity:")
    for name, chip, count in SANITY:
        e = by_name[name]
        devices = e.get("GpuInfo", {}).get("Gpus", []) or e.get("NeuronInfo", {}).get("NeuronDevices", [])
        ok = sum(d["Count"] for d in devices if d["Name"] == chip) == count
        print(
            f"  {'ok ' if ok else 'BAD'} {name}: {e['VCpuInfo']['DefaultVCpus']} vCPU, "
            f"{e['MemoryInfo']['SizeInMiB']} MiB, {accel(e)} (want {count}x {chip})"
        )
        if not ok:
            raise SystemExit(f"sanity check failed for {name}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    ap.add_argument("--moto-data", type=Path, help="path to moto's instance_types.json[.gz]")
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if the file is stale")
    args = ap.parse_args(argv)

    moto_path = args.moto_data or find_moto_data()
    entries, used_hand = build(load_moto(moto_path))
    validate(entries)
    text = render(entries)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: rerun {Path(__file__).name}", file=sys.stderr)
            return 1
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
    summarise(entries, args.output, used_hand, moto_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
