package logagg

import "strconv"

// ANSI SGR codes. Plain escapes are enough: [ColorFor] decides whether
// an output gets them, and every terminal we run on speaks them.
const (
	ansiReset = "\x1b[0m"
	ansiDim   = "\x1b[2m"
	ansiRed   = "\x1b[31m"
)

// rankColors tell neighbouring ranks apart at a glance; red is left out,
// it marks stderr.
var rankColors = [...]string{
	"\x1b[36m", // cyan
	"\x1b[32m", // green
	"\x1b[33m", // yellow
	"\x1b[34m", // blue
	"\x1b[35m", // magenta
	"\x1b[96m", // bright cyan
	"\x1b[92m", // bright green
	"\x1b[94m", // bright blue
}

// FormatLine renders a line as its rank in brackets followed by its text:
// `[3] step 100 loss=0.42`, without a newline; a line of the client
// program as `[client] text`. With color the prefix is colored per rank,
// and red for stderr lines; the text is left as the proc wrote it.
func FormatLine(l Line, color bool) string {
	return string(appendLine(nil, l, color, false))
}

// FormatMeshLine is FormatLine with the line's mesh before its rank:
// `[trainer 3] step 100`, for a job whose procs of several meshes print
// (a line without a mesh is as FormatLine renders it).
func FormatMeshLine(l Line, color bool) string {
	return string(appendLine(nil, l, color, true))
}

// FormatGroup renders a group as its first line, prefixed with the
// number of lines when there is more than one:
// `[37 similar log lines] [3] step 100 loss=0.42`. The count is dimmed
// with color.
func FormatGroup(g Group, color bool) string {
	return string(appendGroup(make([]byte, 0, len(g.First.Text)+48), g, color, false))
}

func appendGroup(b []byte, g Group, color, mesh bool) []byte {
	if g.Count <= 1 {
		return appendLine(b, g.First, color, mesh)
	}
	if color {
		b = append(b, ansiDim...)
	}
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(g.Count), 10)
	b = append(b, " similar log lines]"...)
	if color {
		b = append(b, ansiReset...)
	}
	b = append(b, ' ')
	return appendLine(b, g.First, color, mesh)
}

// appendLine appends l with its prefix: [rank], [mesh rank] when mesh is
// set and l has one, [client] for the client's lines.
func appendLine(b []byte, l Line, color, mesh bool) []byte {
	if color {
		if l.Stream == Stderr {
			b = append(b, ansiRed...)
		} else {
			b = append(b, rankColors[uint(l.Rank)%uint(len(rankColors))]...)
		}
	}
	b = append(b, '[')
	switch {
	case l.Proc == ClientProc:
		b = append(b, ClientProc...)
	case mesh && l.Mesh != "":
		b = append(b, l.Mesh...)
		b = append(b, ' ')
		fallthrough
	default:
		b = strconv.AppendInt(b, int64(l.Rank), 10)
	}
	b = append(b, ']')
	if color {
		b = append(b, ansiReset...)
	}
	b = append(b, ' ')
	return append(b, l.Text...)
}
