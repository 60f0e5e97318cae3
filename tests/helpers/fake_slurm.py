"""Stand-ins for SLURM's commands (scontrol, squeue, scancel, sbatch, sacct) on PATH, for tests of the checks of
``gear_repro/utils/slurm.py`` without a cluster: each prints what the test wrote into its folder, in the format
SLURM 22.05 prints it (the one-node cluster of `make slurm-local`), and appends its arguments to ``calls.log``;
sbatch also keeps a copy of each submission script it is given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# `scontrol -o show partition` / `scontrol -o show node` of the one-node cluster (2 CPUs, 24105 MiB), as printed
PARTITION_GEAR = (
    "PartitionName=gear AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES QoS=N/A "
    "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED "
    "MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=vm PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO "
    "OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs=2 TotalNodes=1 SelectTypeParameters=NONE "
    "JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED TRES=cpu=2,mem=24105M,node=1,billing=2")
NODE_VM = (
    "NodeName=vm Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=7.12 AvailableFeatures=(null) "
    "ActiveFeatures=(null) Gres=(null) NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8 OS=Linux 6.18.44-fc-v669 "
    "#1 SMP PREEMPT_DYNAMIC @0  RealMemory=24105 AllocMem=0 FreeMem=18222 Sockets=2 Boards=1 State=IDLE "
    "ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gear  BootTime=2026-11-27T22:01:30 "
    "SlurmdStartTime=2026-11-27T22:03:01 LastBusyTime=2026-11-27T22:19:14 CfgTRES=cpu=2,mem=24105M,billing=2 "
    "AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s")

_SCRIPTS = {
    "scontrol": """case "$*" in
  *ping*) echo "Slurmctld(primary) at vm is UP" ;;
  *"show partition"*) cat "$D/partitions.txt" ;;
  *"show node"*) cat "$D/nodes.txt" ;;
esac""",
    # squeue.txt: the lines squeue prints (the test writes them as `-o "%i|%P|%r"` would); squeue.err: it fails
    "squeue": """if [ -f "$D/squeue.err" ]; then cat "$D/squeue.err" >&2; exit 1; fi
cat "$D/squeue.txt" 2>/dev/null""",
    "scancel": "",
    "sbatch": """n=$(ls "$D"/submitted_*.sh 2>/dev/null | wc -l)
cp "$1" "$D/submitted_$n.sh"
echo "Submitted batch job $((41 + n))\"""",
    # sacct.txt: submitit's state poll (`sacct -o JobID,State,NodeList --parsable2`)
    "sacct": """echo "JobID|State|NodeList"
cat "$D/sacct.txt" 2>/dev/null""",
}


class FakeSlurm:
    """The stand-in commands in ``<folder>/bin``, put first on PATH (also of subprocesses started with os.environ)."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch, partitions: tuple[str, ...] = (PARTITION_GEAR,),
                 nodes: tuple[str, ...] = (NODE_VM,)) -> None:
        self.dir = folder
        (folder / "bin").mkdir(parents=True, exist_ok=True)
        for name, body in _SCRIPTS.items():
            path = folder / "bin" / name
            path.write_text(f'#!/bin/sh\nD="{folder}"\necho "{name} $*" >> "$D/calls.log"\n{body}\n')
            path.chmod(0o755)
        self.set_cluster(partitions, nodes)
        monkeypatch.setenv("PATH", f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}")

    def set_cluster(self, partitions: tuple[str, ...], nodes: tuple[str, ...]) -> None:
        (self.dir / "partitions.txt").write_text("".join(f"{p}\n" for p in partitions))
        (self.dir / "nodes.txt").write_text("".join(f"{n}\n" for n in nodes))

    def queue(self, *lines: str) -> None:
        """What squeue lists from now on (``job|partition|reason`` lines)."""
        (self.dir / "squeue.txt").write_text("".join(f"{line}\n" for line in lines))

    def accounting(self, *lines: str) -> None:
        """What sacct lists from now on (``JobID|State|NodeList`` lines)."""
        (self.dir / "sacct.txt").write_text("".join(f"{line}\n" for line in lines))

    def calls(self, command: str) -> list[str]:
        """The arguments of each call of ``command`` so far."""
        log = self.dir / "calls.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [line[len(command) + 1:] for line in lines if line.split(" ", 1)[0] == command]

    def submitted(self) -> list[str]:
        """The submission scripts sbatch was given, in order."""
        return [p.read_text() for p in sorted(self.dir.glob("submitted_*.sh"))]


def node(name: str, cpus: int, mem_mib: int, state: str = "IDLE", partitions: str = "gear", gres: str = "(null)") -> str:
    """One `scontrol -o show node` line (the fields the checks read, in SLURM's order)."""
    return (f"NodeName={name} Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv={cpus} CPUTot={cpus} CPULoad=0.00 "
            f"AvailableFeatures=(null) ActiveFeatures=(null) Gres={gres} NodeAddr={name} NodeHostName={name} "
            f"Version=22.05.8 OS=Linux 6.1.0 #1 SMP PREEMPT_DYNAMIC  RealMemory={mem_mib} AllocMem=0 FreeMem=1 "
            f"Sockets={cpus} Boards=1 State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
            f"Partitions={partitions}  BootTime=2026-11-27T22:01:30 CfgTRES=cpu={cpus},mem={mem_mib}M,billing={cpus}")


def partition(name: str, default: bool = False, max_time: str = "UNLIMITED", max_nodes: str = "UNLIMITED") -> str:
    """One `scontrol -o show partition` line."""
    return (f"PartitionName={name} AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL "
            f"Default={'YES' if default else 'NO'} QoS=N/A DefaultTime=NONE MaxNodes={max_nodes} MaxTime={max_time} "
            f"MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=n[1-9] State=UP DefMemPerNode=UNLIMITED "
            f"MaxMemPerNode=UNLIMITED")
