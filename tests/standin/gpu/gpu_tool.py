# SPDX-License-Identifier: GPL-3.0-or-later
"""STAND-IN amd-smi and rocm-smi for the stand-in cluster's nodes (no GPU there).

``amd-smi`` and ``rocm-smi`` beside this file run it with their own name first. It prints the real
tools' JSON shapes (tests/unit/plugins/module_utils/gpu_tools/) for a few fake GPUs, set by knobs in
$AORTA_STANDIN_GPU (default /etc/aorta-standin/gpu.json):
  gpus (8), partitions (1: SPX), driver ("6.8.5"), rocm ("6.2.4"), model, vbios,
  processes ([{"pid": n, "name": s}]), ecc_uncorrectable (0), ecc_correctable (0),
  delay_s (0: seconds before any answer; a large value is a hung tool).
"""

from __future__ import annotations

import json
import os
import sys
import time


def knobs() -> dict:
    try:
        with open(os.environ.get("AORTA_STANDIN_GPU", "/etc/aorta-standin/gpu.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def amd_smi(args: list[str], k: dict, gpus: range, partitions: int) -> int:
    def bdf(gpu: int) -> str:
        return f"0000:{0x05 + 0x20 * (gpu // partitions):02x}:00.0"

    def gpu_data(rows: list) -> None:
        print(json.dumps({"gpu_data": rows}, indent=4))

    words = [a for a in args if not a.startswith("-")]
    command = words[0] if words else ""
    if command == "list":
        rows = [
            {
                "gpu": g,
                "bdf": bdf(g),
                "uuid": f"standin-{g:04x}",
                "kfd_id": 40000 + g,
                "node_id": 2 + g,
                "partition_id": g % partitions,
            }
            for g in gpus
        ]
        if "--csv" in args:
            # As amd-smi 24.x prints it: a header, then one row per GPU (partition).
            print("gpu,gpu_bdf,gpu_uuid,kfd_id,node_id,partition_id")
            for r in rows:
                print(f"{r['gpu']},{r['bdf']},{r['uuid']},{r['kfd_id']},{r['node_id']},{r['partition_id']}")
        else:
            print(json.dumps(rows, indent=4))
    elif command == "static":
        gpu_data(
            [
                {
                    "gpu": g,
                    "asic": {"market_name": k.get("model", "STAND-IN MI300X"), "device_id": "0x74a1"},
                    "vbios": {"version": k.get("vbios", "022.040.003.043.000001")},
                    "driver": {"name": "amdgpu", "version": k.get("driver", "6.8.5")},
                }
                for g in gpus
            ]
        )
    elif command == "process":
        listed = [
            {
                "process_info": {
                    "name": p.get("name", "python3"),
                    "pid": int(p["pid"]),
                    "mem_usage": {"value": 1024, "unit": "MB"},
                }
            }
            for p in k.get("processes") or []
        ]
        gpu_data([{"gpu": g, "process_list": listed if g == 0 else []} for g in gpus])
    elif command == "metric":
        gpu_data(
            [
                {
                    "gpu": g,
                    "ecc": {
                        "total_correctable_count": int(k.get("ecc_correctable", 0)) if g == 0 else 0,
                        "total_uncorrectable_count": int(k.get("ecc_uncorrectable", 0)) if g == 0 else 0,
                        "total_deferred_count": 0,
                    },
                }
                for g in gpus
            ]
        )
    elif command == "version":
        print(
            json.dumps(
                [
                    {
                        "tool": "AMDSMI Tool (STAND-IN)",
                        "version": "24.6.3+standin",
                        "amdsmi_library_version": "24.6.3",
                        "rocm_version": k.get("rocm", "6.2.4"),
                    }
                ],
                indent=4,
            )
        )
    else:
        print(f"STAND-IN amd-smi: unknown command {command}", file=sys.stderr)
        return 2
    return 0


def rocm_smi(args: list[str], gpus: range, partitions: int) -> int:
    if "--json" not in args:
        print("STAND-IN rocm-smi: only --json output is imitated", file=sys.stderr)
        return 2
    cards = {
        f"card{g}": {
            "Device Name": "STAND-IN MI300X",
            "Device ID": "0x74a1",
            "Device Rev": "0x00",
            "PCI Bus": f"0000:{0x05 + 0x20 * (g // partitions):02X}:00.0",
        }
        for g in gpus
    }
    print(json.dumps(cards, indent=4))
    return 0


def main(argv: list[str]) -> int:
    tool, args = argv[0], argv[1:]
    k = knobs()
    devices, partitions = int(k.get("gpus", 8)), int(k.get("partitions", 1))
    time.sleep(float(k.get("delay_s", 0)))
    gpus = range(devices * partitions)
    return amd_smi(args, k, gpus, partitions) if tool == "amd-smi" else rocm_smi(args, gpus, partitions)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
