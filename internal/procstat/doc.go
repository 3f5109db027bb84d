// Package procstat reads what Linux's /proc/PID/stat says of a process:
// its state, its parent, the CPU time it used and its resident memory. It
// is how a host agent tells a stopped proc from a busy one, how a proc
// tells the job state feed its CPU and memory, and how tests find
// processes and measure one process's own CPU.
package procstat
