{{/*
Names, labels, and the file layout shared by the containers of a pod.

File layout (one place, used by every template):
  /etc/nats/nats.conf           ConfigMap: the main configuration (read-only)
  /etc/nats-users/users.conf    emptyDir: the users file, written by the init container and then
                                the sidecar, included by nats.conf as "../nats-users/users.conf"
                                (nats resolves include paths against the including file's folder)
  /var/run/nats/nats.pid        emptyDir: nats-server's pid file, read by the sidecar to signal
                                reloads through the shared process namespace
  /data/jetstream               PersistentVolumeClaim: the JetStream store
  /etc/mesh/records.json        projected Secrets: the records,
  /etc/mesh/password              the reconciler's bus password,
  /etc/mesh/token                 the admin token of the sidecar's POST endpoints
  /etc/nats-tls/                Secret: tls.crt, tls.key, ca.crt (tls.enabled)
  /etc/nats-route-tls/          Secret: the routes' certificate, key and CA (routes.tls.enabled)
*/}}

{{- define "mesh.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mesh.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mesh.headlessName" -}}
{{- printf "%s-headless" (include "mesh.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mesh.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mesh.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mesh.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mesh.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mesh.clustered" -}}
{{- if gt (int .Values.replicas) 1 }}true{{ end }}
{{- end }}

{{/* Paths (see the layout above). */}}
{{- define "mesh.path.configDir" -}}/etc/nats{{- end }}
{{- define "mesh.path.usersDir" -}}/etc/nats-users{{- end }}
{{- define "mesh.path.usersFile" -}}/etc/nats-users/users.conf{{- end }}
{{- define "mesh.path.usersInclude" -}}../nats-users/users.conf{{- end }}
{{- define "mesh.path.pidDir" -}}/var/run/nats{{- end }}
{{- define "mesh.path.pidFile" -}}/var/run/nats/nats.pid{{- end }}
{{- define "mesh.path.dataDir" -}}/data{{- end }}
{{- define "mesh.path.secretsDir" -}}/etc/mesh{{- end }}
{{- define "mesh.path.records" -}}/etc/mesh/records.json{{- end }}
{{- define "mesh.path.password" -}}/etc/mesh/password{{- end }}
{{- define "mesh.path.token" -}}/etc/mesh/token{{- end }}
{{- define "mesh.path.tlsDir" -}}/etc/nats-tls{{- end }}
{{- define "mesh.path.routeTlsDir" -}}/etc/nats-route-tls{{- end }}

{{/* Routes authenticate with the route credential (replicas > 1 and routes.authorization). */}}
{{- define "mesh.routeAuth" -}}
{{- if and (include "mesh.clustered" .) .Values.routes.authorization }}true{{ end }}
{{- end }}

{{- define "mesh.routeTls" -}}
{{- if and (include "mesh.clustered" .) .Values.routes.tls.enabled }}true{{ end }}
{{- end }}

{{- define "mesh.routeTlsSecretName" -}}
{{- required "routes.tls.secretName (or tls.existingSecret) is required when routes.tls.enabled" (default .Values.tls.existingSecret .Values.routes.tls.secretName) }}
{{- end }}

{{/*
The route URLs, one per pod, as a nats.conf array. With routes.authorization each carries the
credential as $(MESH_ROUTE_PASSWORD), which Kubernetes replaces from the container's
environment (a secretKeyRef), so the password is in no manifest but its Secret.
*/}}
{{- define "mesh.routeUrls" -}}
{{- $auth := "" }}
{{- if include "mesh.routeAuth" . }}
{{- $auth = printf "%s:$(MESH_ROUTE_PASSWORD)@" .Values.routes.user }}
{{- end }}
{{- $urls := list }}
{{- range $i := until (int .Values.replicas) }}
{{- $urls = append $urls (printf "\"nats://%s%s-%d.%s.%s.svc.%s:%d\"" $auth (include "mesh.fullname" $) $i (include "mesh.headlessName" $) $.Release.Namespace $.Values.clusterDomain (int $.Values.nats.ports.cluster)) }}
{{- end }}
{{- printf "[%s]" (join ", " $urls) }}
{{- end }}

{{/* Secrets: the chart's own, or the ones named in values. */}}
{{- define "mesh.recordsSecretName" -}}
{{- if and .Values.records.content .Values.records.existingSecret }}
{{- fail "records: set either content or existingSecret, not both" }}
{{- end }}
{{- default (printf "%s-records" (include "mesh.fullname" .)) .Values.records.existingSecret }}
{{- end }}

{{- define "mesh.credentialsSecretName" -}}
{{- printf "%s-credentials" (include "mesh.fullname" .) }}
{{- end }}

{{/*
The Secret name and key holding one credential, as JSON. Argument: (list $ "valuesKey" "chartKey"):
the credential's values (.Values.<valuesKey>) and its key in the chart's own Secret.
*/}}
{{- define "mesh.credentialRef" -}}
{{- $root := index . 0 }}{{ $v := index $root.Values (index . 1) }}{{ $chartKey := index . 2 }}
{{- if and $v.value $v.existingSecret }}
{{- fail (printf "%s: set either value or existingSecret, not both" (index . 1)) }}
{{- end }}
{{- if $v.existingSecret }}
{{- dict "name" $v.existingSecret "key" $v.key | toJson }}
{{- else }}
{{- dict "name" (include "mesh.credentialsSecretName" $root) "key" $chartKey | toJson }}
{{- end }}
{{- end }}

{{/*
Base64 of a chart-managed credential: the value given, else the one already in the release's
Secret (kept across upgrades), else a new random one. Argument: (list $ "valuesKey" "chartKey").
*/}}
{{- define "mesh.credentialData" -}}
{{- $root := index . 0 }}{{ $v := index $root.Values (index . 1) }}{{ $chartKey := index . 2 }}
{{- if and (eq (index . 1) "adminToken") $v.value (lt (len $v.value) 32) }}
{{- fail "adminToken.value: shorter than 32 characters, which the sidecar refuses (make one with: openssl rand -hex 32)" }}
{{- end }}
{{- if $v.value }}
{{- $v.value | b64enc }}
{{- else }}
{{- $existing := lookup "v1" "Secret" $root.Release.Namespace (include "mesh.credentialsSecretName" $root) }}
{{- $data := dig "data" dict ($existing | default dict) }}
{{- if hasKey $data $chartKey }}
{{- index $data $chartKey }}
{{- else }}
{{- randAlphaNum 40 | b64enc }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mesh.reconcilerImage" -}}
{{- printf "%s:%s" .Values.reconciler.image.repository (default .Chart.AppVersion .Values.reconciler.image.tag) }}
{{- end }}

{{- define "mesh.natsImage" -}}
{{- printf "%s:%s" .Values.nats.image.repository .Values.nats.image.tag }}
{{- end }}

{{/* The restrictive security context of every container. */}}
{{- define "mesh.containerSecurityContext" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "mesh.busUrl" -}}
{{- printf "%s://127.0.0.1:%d" (ternary "tls" "nats" .Values.tls.enabled) (int .Values.nats.ports.client) }}
{{- end }}

{{- define "mesh.monitorUrl" -}}
{{- printf "http://127.0.0.1:%d" (int .Values.nats.ports.monitor) }}
{{- end }}

{{/* The users file is rendered and kept by mesh-reconciler (reconciler.usersFile: managed). */}}
{{- define "mesh.usersFileManaged" -}}
{{- if eq .Values.reconciler.usersFile "managed" }}true{{ end }}
{{- end }}

{{- define "mesh.serviceAccountName" -}}
{{- default (include "mesh.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/*
The pass settings of every mesh-reconciler process in the pod (the init container's
render-users, the sidecar's daemon, and whatever on-call runs with kubectl exec), set once here:
the same records, identity, prune, lease and users scope everywhere. With more than one replica
every sidecar runs with the lease (one actor on the cluster), and the init container renders the
users file with the lease's permission, as the daemon will.
*/}}
{{- define "mesh.reconcilerEnv" -}}
- name: MESH_RECONCILER_RECORDS
  value: {{ include "mesh.path.records" . }}
- name: MESH_RECONCILER_BUS
  value: {{ include "mesh.busUrl" . | quote }}
- name: MESH_RECONCILER_USER
  value: {{ .Values.reconciler.user | quote }}
- name: MESH_RECONCILER_PASSWORD_FILE
  value: {{ include "mesh.path.password" . }}
{{- if include "mesh.usersFileManaged" . }}
- name: MESH_RECONCILER_USERS_FILE
  value: {{ include "mesh.path.usersFile" . }}
- name: MESH_RECONCILER_USERS_SCOPE
  value: server
{{- end }}
- name: MESH_RECONCILER_PID_FILE
  value: {{ include "mesh.path.pidFile" . }}
- name: MESH_RECONCILER_MONITOR
  value: {{ include "mesh.monitorUrl" . | quote }}
{{- if eq (int .Values.replicas) 1 }}
{{- /* A standalone 2.9 server shows no store on disk: the sidecar reads the data volume (read
  only) to recreate a deleted stream once its old folder is gone. Clusters do not use it. */}}
- name: MESH_RECONCILER_STORE_DIR
  value: {{ include "mesh.path.dataDir" . }}/jetstream
{{- end }}
- name: MESH_RECONCILER_PRUNE
  value: {{ ternary "1" "0" .Values.reconciler.prune | quote }}
- name: MESH_RECONCILER_LEASE
  value: {{ ternary "1" "0" (gt (int .Values.replicas) 1) | quote }}
{{- if .Values.tls.enabled }}
- name: MESH_RECONCILER_CA_FILE
  value: {{ include "mesh.path.tlsDir" . }}/ca.crt
{{- end }}
{{- end }}
