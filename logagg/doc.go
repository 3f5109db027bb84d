// Package logagg carries the output of a job's procs to the user: it
// captures each proc's stdout and stderr line by line, groups similar
// lines so that hundreds of ranks printing the same thing read as one
// line, and keeps every line of a job in a file that `monarch logs` can
// replay or follow. It also writes monarch's own system logs.
//
// # Capture
//
// A proc's host agent reads its stdout and stderr and splits them into
// [Line]s: one per line of output, without the newline, cut at [MaxLine]
// bytes so that one runaway line cannot hold up the rest, tagged with
// host, proc, the name of the proc's mesh, rank, stream and time. Lines
// travel to the client on the bus in order per proc and stream. The job's
// client program's own stdout and stderr are captured the same way by its
// launcher, as lines of the proc "client" ([ClientProc]).
//
// # Aggregation
//
// The client prints lines as they come (`[3] step 100 loss=0.42`; once
// procs of a second mesh have printed, `[trainer 3] step 100`, and the
// client program's own `[client] text`) or, with
// an aggregation window, prints each group of similar lines once per
// window:
//
//	[37 similar log lines] [3] step 100 loss=0.42
//
// Two lines are similar when they come from the same stream and have the
// same [Template]: the line's tokens with numbers, hex values, UUIDs,
// addresses and timestamps masked. Computing a template costs time linear
// in the length of the line and nothing per group, where comparing each
// line with every group by edit distance costs O(groups × length²). The
// [Aggregator] holds one window of groups; its owner decides when the
// window ends and calls Flush. [FormatLine] and [FormatGroup] render
// lines and groups, with ANSI colors when [ColorFor] says the output
// takes them: a terminal, and NO_COLOR not set.
//
// # Printing
//
// A [Printer] is the one printer of proc lines, used by the client for
// its live output and by `monarch logs`: raw or grouped per window, to a
// stdout and a stderr writer by the lines' stream, in writes of whole
// lines of at most 4 KiB. It has no clock and no goroutine: its owner
// passes the time in and ticks it.
//
// # Store
//
// The client appends every line of the job to <dir>/<job>.log with a
// [Writer]: JSON lines, bounded in size by rotation to <job>.log.1,
// private to the user (0600 in a 0700 dir). [Read] replays a job's log
// through a [Filter] and can follow it while the job runs, until the
// writer closes it or its process is gone ([Follow] also says when it
// has caught up); [Jobs] lists the jobs with a log, newest first. A
// [Filter] selects by time, host, mesh, rank, stream and text.
//
// # System logs
//
// monarch's own messages, never the user's output: [SystemLogger] gives
// each process of a job a logger that writes to [SystemLogPath]
// (/tmp/$USER/monarch_<job>_<role>.log, in a 0700 folder;
// [EnvSystemLogDir] moves them) at the level of [EnvFileLevel] (default
// INFO), and the more urgent messages to stderr at [EnvStderrLevel]
// (default WARN). A folder another user squatted (theirs, a link, open to
// others, or in a folder of theirs) stops nothing: [UseSystemLogDir] puts
// a fresh private one in its place, says so once on stderr, and hands it
// to the process's children. A file is made only when something is written to it;
// [PruneSystemLogs] removes those not written for SystemLogRetention (a
// week) whose job no longer runs.
//
// # Concurrency
//
// An Aggregator or a Printer is for one goroutine. A Writer may be
// shared. Read and Follow call their functions from the calling
// goroutine, and every wait in them ends with its context.
package logagg
