#!/bin/bash
# The layering of sheep/ and sheep/trace/, drawn from the build, file by file.
#
#   layers.sh [-v] [--report] [BUILDDIR | SHEEP_OBJDIR]
#
# The graph: one node per object file of sheep (sheep/x.c is "x",
# sheep/store/plain.c "store/plain", sheep/trace/hook.c "trace/hook"). An
# edge a -> b when a's object
#   - calls a function or reads/writes data that b's object defines
#     (nm -u of a against nm --defined-only of b: T, D, B, R ... symbols);
#   - uses a static inline function of b's header (b.h beside b.c), seen in
#     a's debug information (DWARF: the functions a's code inlined or kept,
#     with the file that declares them): stat.h's stat_clock makes work use
#     stat although no symbol is left. A header without a .c of its own
#     (lock.h, trace_priv.h) is no node: what its inline functions reference
#     shows up in the objects that inline them.
# A circle is a strongly connected component (files that reach each other).
# The floors are derived from the graph: a file's floor is one above the
# highest floor it uses, a circle is one floor, the bottom is 0.
#
# The test fails when
#   - a circle has more files than allowed (MAX_CIRCLE below for sheep/,
#     MAX_TRACE_CIRCLE for one with a file of sheep/trace in it);
#   - the graph less the baseline's back-edges still has a circle (a new
#     back-edge: break it, do not list it);
#   - a baseline entry matches no edge, or none that lies on a circle
#     (it is no longer a back-edge: take it off); an entry about files
#     that the build lacks (sheep/trace with --disable-trace) is idle.
# LAYERS_MAX_CIRCLE, LAYERS_MAX_TRACE_CIRCLE and LAYERS_BASELINE (a file of
# "FROM -> TO SYMBOL<tab>why" lines) replace the settings below.
# Prints the floors, the circles with their edges and the baseline with
# --report; every edge with -v. Run from the build tree's tests/ (make
# check does), or give a build directory (or its sheep/); OBJDIR (the
# sheep/ of a build) still works.

# The largest circle allowed, in files: 3 in sheep/ (issue 21's bar; the
# largest is 2 today), 1 (none) in sheep/trace.
MAX_CIRCLE=${LAYERS_MAX_CIRCLE:-3}
MAX_TRACE_CIRCLE=${LAYERS_MAX_TRACE_CIRCLE:-1}

# The baseline: the back-edges of today's circles, "FROM -> TO SYMBOL" (each
# a shell pattern), with why they are there. Removing them leaves no
# circle; each one must still lie on a circle. Shrink it.
declare -A baseline=(
	["nbd_opt -> nbd *"]="the option haggling uses nbd.c's connection and message helpers, nbd.c calls it"
	["work -> stat stat_clock"]="the workers time their queues with stat.h's clock, stat.c keeps its timer on a work queue"
)

verbose=
report=
where=
for a in "$@"; do
	case "$a" in
	-v | --verbose) verbose=1 ;;
	--report) report=1 ;;
	-h | --help)
		sed -n '2,/^$/s/^# \{0,1\}//p' "$0"
		exit 0
		;;
	-*) echo "usage: $0 [-v] [--report] [BUILDDIR | SHEEP_OBJDIR]" >&2 && exit 2 ;;
	*) where=$a ;;
	esac
done
if [ -n "$where" ]; then
	objdir=$where
	[ -d "$where/sheep" ] && objdir=$where/sheep
else
	objdir=${OBJDIR:-../sheep}
fi

T=$(mktemp -d /tmp/layers.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT

# The objects, one node each: path and name
for o in "$objdir"/sheep-*.o "$objdir"/store/sheep-*.o "$objdir"/cluster/sheep-*.o \
	"$objdir"/trace/libtrace_a-*.o; do
	[ -f "$o" ] || continue
	f=${o#"$objdir"/}
	d=${f%/*}
	[ "$d" = "$f" ] && d= || d=$d/
	b=${f##*/}
	b=${b%.o}
	b=${b#sheep-}
	b=${b#libtrace_a-}
	echo "$o $d$b"
done >"$T/objs"
n=$(wc -l <"$T/objs")
[ "$n" -gt 1 ] || { echo "FAIL: no objects under $objdir: build sheep first"; exit 1; }
cut -d' ' -f2 "$T/objs" | sort -u >"$T/nodes"
mapfile -t objs < <(cut -d' ' -f1 "$T/objs")

# what each object defines (any global symbol: functions, data) and uses
nm -A -g --defined-only "${objs[@]}" | tr ':' ' ' |
	awk 'NR == FNR { u[$1] = $2; next } NF == 4 { print $4, u[$1], $3 }' "$T/objs" - >"$T/defs"
nm -A -u "${objs[@]}" | tr ':' ' ' |
	awk 'NR == FNR { u[$1] = $2; next } { print u[$1], $NF }' "$T/objs" - >"$T/uses"

# The functions an object defined or inlined from a header, with the
# header's path: readelf's dump of .debug_info (the subprograms that are
# definitions, with their DW_AT_decl_file) and of the line table's
# directory and file names (what those numbers name).
readelf --debug-dump=info --debug-dump=rawline "${objs[@]}" 2>/dev/null |
	grep -E '^File: |Abbrev Number|DW_AT_(name|comp_dir|decl_file|declaration)|Table|^  [0-9]+	|^$' |
	awk 'NR == FNR { u[$1] = $2; next }
function val(s) { sub(/^[^:]*: /, "", s); sub(/.*\): /, "", s); return s }
function flush() {
	if (tag == "sub" && name != "" && file != "" && !decl) { nsub++; sname[nsub] = name; sfile[nsub] = file }
	tag = ""; name = ""; file = ""; decl = 0
}
function done(   i, f, d, path) { # the end of one object
	flush()
	if (unit == "") return
	if (!(0 in dir)) dir[0] = compdir
	if (cuname !~ /^\//) cuname = compdir "/" cuname
	print "S", unit, cuname
	for (i = 1; i <= nsub; i++) {
		f = sfile[i]
		if (!(f in fname)) continue
		path = fname[f]
		if (path !~ /^\//) {
			d = dir[fdir[f]]
			if (d !~ /^\//) d = compdir "/" d
			path = d "/" path
		}
		if (path ~ /\.h$/) print "H", unit, path, sname[i]
	}
	split("", dir); split("", fdir); split("", fname)
	nsub = 0; cu_done = 0; ntables = 0; table = ""; cuname = ""; compdir = ""
}
/^File: / { done(); unit = u[substr($0, 7)]; next }
/^ <[0-9]+><[0-9a-f]+>: Abbrev Number:/ {
	flush()
	if ($0 ~ /DW_TAG_subprogram/) tag = "sub"
	else if ($0 ~ /DW_TAG_compile_unit/ && !cu_done) tag = "cu"
	next
}
tag == "cu" && /DW_AT_name/ { cuname = val($0) }
tag == "cu" && /DW_AT_comp_dir/ { compdir = val($0); cu_done = 1 }
tag == "sub" && /DW_AT_name/ { name = val($0) }
tag == "sub" && /DW_AT_decl_file/ { file = $NF }
tag == "sub" && /DW_AT_declaration/ { decl = 1 }
/^ The Directory Table/ { flush(); table = ntables < 1 ? "dir" : ""; next }
/^ The File Name Table/ { table = ntables < 1 ? "file" : ""; next }
table != "" && /^$/ { if (table == "file") ntables++; table = ""; next }
table == "dir" && /^  [0-9]+\t/ {
	i = $1; s = $0; sub(/^  [0-9]+\t/, "", s); sub(/.*\): /, "", s); dir[i] = s; next
}
table == "file" && /^  [0-9]+\t/ {
	n = split($0, p, "\t"); s = p[n]; sub(/.*\): /, "", s); fdir[$1] = $2; fname[$1] = s; next
}
END { done() }' "$T/objs" - >"$T/dwarf"
# without debug information the inlined header functions are not seen
grep -q '^H' "$T/dwarf" || { echo "FAIL: no debug information in $objdir's objects (build with -g)"; exit 1; }

# a header is a node's when it is that node's source with .h for .c
awk '$1 == "S" { print $3 } $1 == "H" { print $3 }' "$T/dwarf" | sort -u >"$T/paths"
realpath -m -- $(cat "$T/paths") >"$T/real"
paste -d' ' "$T/paths" "$T/real" >"$T/pathmap"
awk 'NR == FNR { real[$1] = $2; next }
	$1 == "S" { p = real[$3]; sub(/\.[cS]$/, "", p); owner[p] = $2; next }
	$1 == "H" { p = real[$3]; sub(/\.h$/, "", p); if ((p in owner) && owner[p] != $2) print $2, owner[p], $4, "inline" }' \
	"$T/pathmap" "$T/dwarf" >"$T/edges.inline"

# edges: from to symbol kind (call, data, inline)
awk 'NR == FNR { if (!($1 in def)) { def[$1] = $2; type[$1] = $3 }; next }
	($2 in def) && def[$2] != $1 {
		print $1, def[$2], $2, (type[$2] ~ /^[TtWi]$/ ? "call" : "data")
	}' "$T/defs" "$T/uses" | cat - "$T/edges.inline" | sort -u >"$T/edges"

if [ -n "${LAYERS_BASELINE:-}" ]; then
	sort "$LAYERS_BASELINE"
else
	for k in "${!baseline[@]}"; do
		printf '%s\t%s\n' "$k" "${baseline[$k]}"
	done | sort
fi >"$T/baseline"

# The graph's work, in awk: circles (Tarjan's strongly connected
# components) of the whole graph and of the graph less the baseline's
# edges, the floors, the baseline's use, the report.
awk -v verbose="$verbose" -v report="$report" -v max_circle="$MAX_CIRCLE" \
	-v max_trace="$MAX_TRACE_CIRCLE" -v nobj="$n" '
function glob(p) { gsub(/[.+?^$(){}|\[\]\\]/, "\\\\&", p); gsub(/\*/, ".*", p); return "^" p "$" }
function tarjan(g, v,   i, w) {
	idx[v] = low[v] = ++counter
	stack[++sp] = v
	onst[v] = 1
	for (i = 1; i <= nadj[g, v]; i++) {
		w = adj[g, v, i]
		if (!(w in idx)) {
			tarjan(g, w)
			if (low[w] < low[v]) low[v] = low[w]
		} else if (onst[w] && idx[w] < low[v])
			low[v] = idx[w]
	}
	if (low[v] == idx[v]) {
		nscc[g]++
		do {
			w = stack[sp--]
			onst[w] = 0
			comp[g, w] = nscc[g]
			size[g, nscc[g]]++
			members[g, nscc[g]] = members[g, nscc[g]] " " w
		} while (w != v)
	}
}
function sccs(g,   i) {
	delete idx; delete low; delete onst; counter = 0; sp = 0; nscc[g] = 0
	for (i = 1; i <= nnodes; i++)
		if (!(node[i] in idx)) tarjan(g, node[i])
}
function add_edge(g, a, b) {
	if ((g, a, b) in has) return
	has[g, a, b] = 1
	adj[g, a, ++nadj[g, a]] = b
}
function sorted(s,   a, n, i, j, t, out) { # sort the words of s
	n = split(s, a, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	out = ""
	for (i = 1; i <= n; i++) out = out (i > 1 ? " " : "") a[i]
	return out
}
function floors(g,   c, m, k, i, d, top) {
	# Tarjan numbers a component after every component it reaches
	top = 0
	for (c = 1; c <= nscc[g]; c++) {
		floor[g, c] = 0
		split(members[g, c], m, " ")
		for (k in m)
			for (i = 1; i <= nadj[g, m[k]]; i++) {
				d = comp[g, adj[g, m[k], i]]
				if (d != c && floor[g, d] + 1 > floor[g, c]) floor[g, c] = floor[g, d] + 1
			}
		if (floor[g, c] > top) top = floor[g, c]
	}
	ntop[g] = top
	return top
}
function print_floors(g,   f, c, i, line, circles) {
	for (f = ntop[g]; f >= 0; f--) {
		line = ""
		circles = ""
		for (c = nscc[g]; c >= 1; c--)
			if (floor[g, c] == f && size[g, c] == 1)
				line = line members[g, c]
		for (i = 1; i <= ncirc[g]; i++)
			if (floor[g, circ[g, i]] == f)
				circles = circles " {" sorted(members[g, circ[g, i]]) "}"
		line = sorted(line)
		printf "  %3d %s%s\n", f, line, line == "" ? substr(circles, 2) : circles
	}
}
function circles(g, out,   c, n, i, j, t, key) { # out[1..n]: the circles, top floor first, by name
	n = 0
	for (c = 1; c <= nscc[g]; c++) {
		if (size[g, c] < 2) continue
		key[++n] = sprintf("%06d %s", 999999 - floor[g, c], sorted(members[g, c]))
		out[n] = c
	}
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && key[j - 1] > key[j]; j--) {
			t = key[j]; key[j] = key[j - 1]; key[j - 1] = t
			t = out[j]; out[j] = out[j - 1]; out[j - 1] = t
		}
	return n
}
function is_trace(s) { return (" " s) ~ / trace\// }
FILENAME == ARGV[1] { node[++nnodes] = $1; next }
FILENAME == ARGV[2] { # baseline: pattern <tab> reason
	split($0, bf, "\t")
	nb++; bkey[nb] = bf[1]; breason[nb] = bf[2]
	split(bf[1], bp, " ")
	bfrom[nb] = glob(bp[1]); bto[nb] = glob(bp[3]); bsym[nb] = glob(bp[4])
	next
}
{ # edges: from to symbol kind
	ne++; efrom[ne] = $1; eto[ne] = $2; esym[ne] = $3; ekind[ne] = $4
	nkind[$4]++
	label = $3 ($4 == "call" ? "()" : $4 == "inline" ? "() inline" : "")
	pairsyms[$1, $2] = pairsyms[$1, $2] (pairsyms[$1, $2] == "" ? "" : ", ") label
	add_edge("all", $1, $2)
	eb[ne] = 0
	for (i = 1; i <= nb; i++)
		if ($1 ~ bfrom[i] && $2 ~ bto[i] && $3 ~ bsym[i]) { eb[ne] = i; break }
	if (!eb[ne]) add_edge("rest", $1, $2)
	if (verbose) print "edge: " $1 " -> " $2 " " label (eb[ne] ? "  [baseline: " bkey[eb[ne]] "]" : "")
}
END {
	sccs("all")
	sccs("rest")
	top = floors("all")
	floors("rest")
	for (g in nscc) {
		split("", tmp)
		ncirc[g] = circles(g, tmp)
		for (i = 1; i <= ncirc[g]; i++) circ[g, i] = tmp[i]
	}
	fail = 0
	biggest = 1; biggest_trace = 1; ncircles = 0
	for (k = 1; k <= ncirc["all"]; k++) {
		c = circ["all", k]
		ncircles++
		s = sorted(members["all", c])
		if (is_trace(s)) {
			if (size["all", c] > biggest_trace) biggest_trace = size["all", c]
			limit = max_trace
		} else {
			if (size["all", c] > biggest) biggest = size["all", c]
			limit = max_circle
		}
		if (size["all", c] > limit) {
			printf "FAIL: a circle of %d files (at most %d allowed): %s\n", size["all", c], limit, s
			fail = 1
		}
	}
	for (k = 1; k <= ncirc["rest"]; k++) {
		c = circ["rest", k]
		s = sorted(members["rest", c])
		printf "FAIL: a circle that no baseline back-edge explains (a new back-edge: break it): %s\n", s
		n = split(s, m, " ")
		for (i = 1; i <= n; i++)
			for (j = 1; j <= n; j++)
				if (((("rest", m[i], m[j]) in has)))
					printf "    %s -> %s: %s\n", m[i], m[j], pairsyms[m[i], m[j]]
		fail = 1
	}
	for (i = 1; i <= ne; i++) {
		if (!eb[i]) continue
		bused[eb[i]]++
		if (comp["all", efrom[i]] == comp["all", eto[i]]) bcircle[eb[i]]++
	}
	for (i = 1; i <= nb; i++) {
		# an entry about files this build lacks (--disable-trace) is idle
		hasfrom = hasto = 0
		for (j = 1; j <= nnodes; j++) {
			if (node[j] ~ bfrom[i]) hasfrom = 1
			if (node[j] ~ bto[i]) hasto = 1
		}
		if (!hasfrom || !hasto) continue
		if (!bused[i]) {
			printf "FAIL: the baseline back-edge \"%s\" no longer occurs: take it off the list\n", bkey[i]
			fail = 1
		} else if (!bcircle[i]) {
			printf "FAIL: the baseline back-edge \"%s\" lies on no circle any more: take it off the list\n", bkey[i]
			fail = 1
		}
	}
	if (report) {
		print "Floors of sheep/ (a file uses only files on lower floors; a circle {...} is one floor):"
		print_floors("all")
		print ""
		print "Floors once the baseline back-edges are gone (the layering they break):"
		print_floors("rest")
		print ""
		for (k = 1; k <= ncirc["all"]; k++) {
			c = circ["all", k]
			s = sorted(members["all", c])
			printf "Circle of %d files (floor %d): %s\n", size["all", c], floor["all", c], s
			n = split(s, m, " ")
			for (i = 1; i <= n; i++)
				for (j = 1; j <= n; j++)
					if ((("all", m[i], m[j]) in has))
						printf "    %s -> %s: %s\n", m[i], m[j], pairsyms[m[i], m[j]]
			print ""
		}
		print "Baseline (back-edges allowed until issue 21 removes them):"
		for (i = 1; i <= nb; i++)
			printf "  %-40s %d edges, %d on a circle: %s\n", bkey[i], bused[i], bcircle[i], breason[i]
		print ""
	}
	split("", pairs)
	for (i = 1; i <= ne; i++) pairs[efrom[i], eto[i]] = 1
	np = 0
	for (pr in pairs) np++
	if (!fail)
		printf "ok: %d objects, %d edges (%d calls, %d data, %d inline) between %d pairs, %d floors; %d circles, the largest %d files in sheep/ (at most %d), %d in sheep/trace (at most %d); %d baseline back-edges\n",
			nobj, ne, nkind["call"], nkind["data"], nkind["inline"], np, top + 1, ncircles, biggest, max_circle, biggest_trace, max_trace, nb
	exit fail
}' "$T/nodes" "$T/baseline" "$T/edges"
