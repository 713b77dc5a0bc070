// CPU time of benchmarked processes from /proc: what a proxy costs per request, independent of how busy the machine was.
import { readFileSync } from 'node:fs';

/** Linux clock ticks per second (USER_HZ), the unit of /proc/<pid>/stat CPU times. */
export const CLOCK_TICKS = 100;

/** User + system CPU ticks of a process (0 when unknown or gone). */
export function procTicks(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** System-mode CPU ticks of a process (0 when unknown or gone): the kernel's share of procTicks. */
export function procSystemTicks(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[12]);
  } catch {
    return 0;
  }
}

/** Read- and write-family system calls a process has made so far (`syscr` + `syscw` of /proc/<pid>/io; 0 when gone). */
export function procSyscalls(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    return Number(/syscr: (\d+)/.exec(io)?.[1] ?? 0) + Number(/syscw: (\d+)/.exec(io)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** A process and all its descendants (gateway replicas, nginx workers), read from /proc/<pid>/task/<tid>/children. */
export function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    try {
      const children = readFileSync(`/proc/${out[i]}/task/${out[i]}/children`, 'utf8').trim();
      if (children !== '') out.push(...children.split(' ').map(Number));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** A meter started now: each call answers the microseconds of CPU the processes have used since. */
export function cpuMeter(pids: readonly number[]): () => number {
  const sum = () => pids.reduce((total, pid) => total + procTicks(pid), 0);
  const before = sum();
  return () => ((sum() - before) * 1e6) / CLOCK_TICKS;
}

/** Like cpuMeter, for the kernel's share: microseconds of system-mode CPU, and read/write system calls, since it started. */
export function kernelMeter(pids: readonly number[]): () => { systemUs: number; syscalls: number } {
  const sys = () => pids.reduce((total, pid) => total + procSystemTicks(pid), 0);
  const calls = () => pids.reduce((total, pid) => total + procSyscalls(pid), 0);
  const sys0 = sys();
  const calls0 = calls();
  return () => ({ systemUs: ((sys() - sys0) * 1e6) / CLOCK_TICKS, syscalls: calls() - calls0 });
}
