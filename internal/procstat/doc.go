// Package procstat reads what Linux's /proc/PID/stat says of a process:
// its state, its parent and the CPU time it used. It is how a host agent
// tells a stopped proc from a busy one, and how tests find processes and
// measure one process's own CPU.
package procstat
