# os/parameters.json (Ganeti's layout, as metad writes it: json.dumps with
# indent=1 and sort_keys) to shell assignments OSP_<NAME>='value', for eval.
# Each parameter is  "name": [  then  "value",  then  "visibility"  lines.
function unescape(s,    out, c, i, code) {
  out = ""
  for (i = 1; i <= length(s); i++) {
    c = substr(s, i, 1)
    if (c != "\\") { out = out c; continue }
    c = substr(s, ++i, 1)
    if (c == "n") out = out "\n"
    else if (c == "t") out = out "\t"
    else if (c == "r") out = out "\r"
    else if (c == "b") out = out "\b"
    else if (c == "f") out = out "\f"
    else if (c == "u") { code = hex(substr(s, i + 1, 4)); i += 4; out = out utf8(code) }
    else out = out c
  }
  return out
}
function hex(h,    v, j) {
  v = 0
  for (j = 1; j <= 4; j++) v = v * 16 + index("0123456789abcdef", tolower(substr(h, j, 1))) - 1
  return v
}
function utf8(v) {
  if (v < 128) return sprintf("%c", v)
  if (v < 2048) return sprintf("%c%c", 192 + int(v / 64), 128 + v % 64)
  return sprintf("%c%c%c", 224 + int(v / 4096), 128 + int(v / 64) % 64, 128 + v % 64)
}
function quote(s) { gsub(/'/, "'\\''", s); return "'" s "'" }
/^ "([^"\\]|\\.)*": \[$/ {
  name = substr($0, 3); sub(/": \[$/, "", name)
  name = toupper(unescape(name)); gsub(/-/, "_", name)
  want = 1; next
}
want == 1 {
  value = $0; sub(/^  "/, "", value); sub(/",$/, "", value)
  if (name ~ /^[A-Z0-9_]+$/) print "OSP_" name "=" quote(unescape(value))
  want = 0
}
