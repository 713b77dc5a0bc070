// Whether a process id names a live process, for the pid lock files of the embedded store and the audit spool.

/** EPERM means it exists but belongs to someone else: still alive. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
