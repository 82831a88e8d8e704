{{/*
RFC 6902 JSON Patch, the add, replace and remove operations, as the official NATS chart's
podTemplate.patch and container.patch take them: a list of {op, path, value}, path a JSON
Pointer ("/spec/containers/0/env/-": "-" appends to a list; "~1" is "/", "~0" is "~").
Applied to a rendered object before it is written out (mesh.applyPatch).
*/}}

{{/* Argument: (dict "node" N "tokens" [..] "op" OP "value" V "path" P). Output: JSON {"v": N'}. */}}
{{- define "mesh.patchNode" -}}
{{- $node := .node }}
{{- $key := first .tokens | replace "~1" "/" | replace "~0" "~" }}
{{- $rest := rest .tokens }}
{{- $op := .op }}
{{- if kindIs "map" $node }}
  {{- if $rest }}
    {{- if not (hasKey $node $key) }}{{ fail (printf "patch %s: no %q" .path $key) }}{{ end }}
    {{- $child := include "mesh.patchNode" (dict "node" (index $node $key) "tokens" $rest "op" $op "value" .value "path" .path) | fromJson }}
    {{- $_ := set $node $key $child.v }}
  {{- else if eq $op "add" }}
    {{- $_ := set $node $key .value }}
  {{- else if not (hasKey $node $key) }}
    {{- fail (printf "patch %s: no %q to %s" .path $key $op) }}
  {{- else if eq $op "replace" }}
    {{- $_ := set $node $key .value }}
  {{- else }}
    {{- $_ := unset $node $key }}
  {{- end }}
{{- else if kindIs "slice" $node }}
  {{- $n := len $node }}
  {{- $i := $n }}
  {{- if ne $key "-" }}
    {{- if not (regexMatch "^(0|[1-9][0-9]*)$" $key) }}{{ fail (printf "patch %s: %q is not a list index" .path $key) }}{{ end }}
    {{- $i = atoi $key }}
  {{- end }}
  {{- $limit := ternary $n (sub $n 1) (and (eq $op "add") (not $rest)) }}
  {{- if gt $i (int $limit) }}{{ fail (printf "patch %s: index %s out of range" .path $key) }}{{ end }}
  {{- $out := list }}
  {{- range $j, $item := $node }}
    {{- if ne $j $i }}
      {{- $out = append $out $item }}
    {{- else if $rest }}
      {{- $child := include "mesh.patchNode" (dict "node" $item "tokens" $rest "op" $op "value" $.value "path" $.path) | fromJson }}
      {{- $out = append $out $child.v }}
    {{- else if eq $op "add" }}
      {{- $out = append (append $out $.value) $item }}
    {{- else if eq $op "replace" }}
      {{- $out = append $out $.value }}
    {{- end }}
  {{- end }}
  {{- if and (eq $i $n) (eq $op "add") (not $rest) }}
    {{- $out = append $out .value }}
  {{- end }}
  {{- $node = $out }}
{{- else }}
  {{- fail (printf "patch %s: %q is in neither an object nor a list" .path $key) }}
{{- end }}
{{- dict "v" $node | toJson }}
{{- end }}

{{/*
Applies a JSON Patch to an object. Argument: (dict "doc" OBJECT "patch" LIST "what" NAME),
NAME naming the value in errors. Output: the patched object as JSON ({"v": ...}).
*/}}
{{- define "mesh.applyPatch" -}}
{{- $doc := fromJson (toJson .doc) }}
{{- range $p := .patch }}
  {{- if not (has $p.op (list "add" "replace" "remove")) }}
    {{- fail (printf "%s: op %v: only add, replace and remove are supported" $.what $p.op) }}
  {{- end }}
  {{- if not (hasPrefix "/" (toString $p.path)) }}
    {{- fail (printf "%s: path %v does not start with /" $.what $p.path) }}
  {{- end }}
  {{- $tokens := rest (splitList "/" $p.path) }}
  {{- $doc = (include "mesh.patchNode" (dict "node" $doc "tokens" $tokens "op" $p.op "value" $p.value "path" (printf "%s %s" $.what $p.path)) | fromJson).v }}
{{- end }}
{{- dict "v" $doc | toJson }}
{{- end }}
