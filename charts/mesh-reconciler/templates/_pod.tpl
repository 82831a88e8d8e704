{{/*
The StatefulSet's pod template (metadata and spec), rendered into statefulset.yaml.
*/}}
{{- define "mesh.podTemplate" -}}
{{- $fullname := include "mesh.fullname" . }}
{{- $password := include "mesh.credentialRef" (list $ "reconcilerPassword" "password") | fromJson }}
{{- $token := include "mesh.credentialRef" (list $ "adminToken" "token") | fromJson }}
{{- $routePassword := include "mesh.credentialRef" (list $ "routePassword" "route-password") | fromJson }}
metadata:
  labels:
    {{- include "mesh.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # nats.conf is read at start: roll the pods when it changes.
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  # The sidecar signals nats-server (SIGHUP: reload the users file) by the PID in the shared
  # pid file; both run as securityContext.runAsUser, which is what lets it.
  shareProcessNamespace: true
  automountServiceAccountToken: {{ .Values.serviceAccount.automountToken }}
  enableServiceLinks: false
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: {{ .Values.securityContext.runAsUser }}
    runAsGroup: {{ .Values.securityContext.runAsGroup }}
    fsGroup: {{ .Values.securityContext.fsGroup }}
    fsGroupChangePolicy: OnRootMismatch
    seccompProfile:
      type: RuntimeDefault
  {{- /* affinity (values) as given; podAntiAffinity adds its term unless affinity has its own. */}}
  {{- $affinity := deepCopy .Values.affinity }}
  {{- if and (ne .Values.podAntiAffinity "none") (not (hasKey $affinity "podAntiAffinity")) }}
  {{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "mesh.selectorLabels" . | fromYaml)) }}
  {{- if eq .Values.podAntiAffinity "hard" }}
  {{- $_ := set $affinity "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) }}
  {{- else }}
  {{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) }}
  {{- end }}
  {{- end }}
  {{- with $affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  # A constraint without a labelSelector counts this release's pods.
  topologySpreadConstraints:
    {{- range . }}
    {{- $c := deepCopy . }}
    {{- if not (hasKey $c "labelSelector") }}
    {{- $_ := set $c "labelSelector" (dict "matchLabels" (include "mesh.selectorLabels" $ | fromYaml)) }}
    {{- end }}
    - {{- toYaml $c | nindent 6 }}
    {{- end }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if .Values.serviceAccount.create }}
  serviceAccountName: {{ include "mesh.serviceAccountName" . }}
  {{- else if .Values.serviceAccount.name }}
  serviceAccountName: {{ .Values.serviceAccount.name }}
  {{- end }}
  {{- if include "mesh.usersFileManaged" . }}
  initContainers:
    # Renders the users file before nats-server starts, so that it starts with its users.
    # Same settings (environment) as the sidecar: the same identity, the lease's
    # permission included, so that the sidecar's first pass finds the file as it wants it.
    - name: render-users
      image: {{ include "mesh.reconcilerImage" . }}
      imagePullPolicy: {{ .Values.reconciler.image.pullPolicy }}
      command: ["mesh-reconciler"]
      args:
        - render-users
        - --out
        - {{ include "mesh.path.usersFile" . }}
      env:
        {{- include "mesh.reconcilerEnv" . | nindent 8 }}
      securityContext:
        {{- include "mesh.containerSecurityContext" . | nindent 8 }}
      {{- with .Values.reconciler.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: mesh-secrets
          mountPath: {{ include "mesh.path.secretsDir" . }}
          readOnly: true
        - name: users
          mountPath: {{ include "mesh.path.usersDir" . }}
  {{- end }}
  containers:
    - name: nats
      image: {{ include "mesh.natsImage" . }}
      imagePullPolicy: {{ .Values.nats.image.pullPolicy }}
      command: ["nats-server", "--config", "{{ include "mesh.path.configDir" . }}/nats.conf"]
      env:
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- if include "mesh.routeAuth" . }}
        # The route credential, for the two values below only ($(...) is replaced by
        # Kubernetes); nats.conf reads MESH_ROUTE_AUTH and MESH_ROUTES.
        - name: MESH_ROUTE_PASSWORD
          valueFrom:
            secretKeyRef:
              name: {{ $routePassword.name }}
              key: {{ $routePassword.key }}
        - name: MESH_ROUTE_AUTH
          value: {{ printf "{user: \"%s\", password: \"$(MESH_ROUTE_PASSWORD)\"}" .Values.routes.user | quote }}
        - name: MESH_ROUTES
          value: {{ include "mesh.routeUrls" . | quote }}
        {{- end }}
        {{- with .Values.nats.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: client
          containerPort: {{ .Values.nats.ports.client }}
        {{- if include "mesh.clustered" . }}
        - name: cluster
          containerPort: {{ .Values.nats.ports.cluster }}
        {{- end }}
        - name: monitor
          containerPort: {{ .Values.nats.ports.monitor }}
        {{- with .Values.nats.extraPorts }}
        # nats.extraPorts: e.g. the websocket or leafnodes port of nats.extraConfig.
        {{- toYaml . | nindent 8 }}
        {{- end }}
      startupProbe:
        httpGet:
          path: /healthz?js-enabled-only=true
          port: monitor
        periodSeconds: 5
        failureThreshold: 60
      livenessProbe:
        httpGet:
          path: /healthz?js-enabled-only=true
          port: monitor
        periodSeconds: 30
        timeoutSeconds: 5
        failureThreshold: 3
      # Ready while the server and its JetStream are up: with ?js-server-only=true, /healthz
      # (2.10+) does not check every stream and consumer, so that one unhealthy stream does
      # not take the server out of the client Service (the reconciler reports the stream).
      readinessProbe:
        httpGet:
          path: /healthz?js-server-only=true
          port: monitor
        periodSeconds: 10
        timeoutSeconds: 5
        failureThreshold: 3
      lifecycle:
        preStop:
          exec:
            # Lame duck mode: drain clients before the SIGTERM.
            command: ["nats-server", "--signal", "ldm={{ include "mesh.path.pidFile" . }}"]
      securityContext:
        {{- include "mesh.containerSecurityContext" . | nindent 8 }}
      {{- with .Values.nats.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: config
          mountPath: {{ include "mesh.path.configDir" . }}
          readOnly: true
        {{- if include "mesh.usersFileManaged" . }}
        - name: users
          mountPath: {{ include "mesh.path.usersDir" . }}
          readOnly: true
        {{- end }}
        - name: pid
          mountPath: {{ include "mesh.path.pidDir" . }}
        - name: data
          mountPath: {{ include "mesh.path.dataDir" . }}
        {{- if .Values.tls.enabled }}
        - name: tls
          mountPath: {{ include "mesh.path.tlsDir" . }}
          readOnly: true
        {{- end }}
        {{- if include "mesh.routeTls" . }}
        - name: route-tls
          mountPath: {{ include "mesh.path.routeTlsDir" . }}
          readOnly: true
        {{- end }}
        {{- with .Values.nats.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    - name: mesh-reconciler
      image: {{ include "mesh.reconcilerImage" . }}
      imagePullPolicy: {{ .Values.reconciler.image.pullPolicy }}
      command: ["mesh-reconciler"]
      args:
        - run
        - --listen
        - {{ printf "0.0.0.0:%d" (int .Values.reconciler.port) | quote }}
        - --token-file
        - {{ include "mesh.path.token" . }}
        - --interval
        - {{ .Values.reconciler.interval | quote }}
      # The pass settings (prune, lease and users scope included) are in the environment, set
      # once (mesh.reconcilerEnv) for this container and the init container, so that any
      # subcommand run here (kubectl exec ... -- mesh-reconciler plan) uses the daemon's.
      env:
        {{- include "mesh.reconcilerEnv" . | nindent 8 }}
        # This container's daemon, for the commands that talk to it (reconcile, hold,
        # release) typed here after kubectl exec, with no flags beyond their own. Not pass
        # settings: the init container has no daemon to ask.
        - name: MESH_RECONCILER_REMOTE
          value: {{ printf "http://127.0.0.1:%d" (int .Values.reconciler.port) | quote }}
        - name: MESH_RECONCILER_TOKEN_FILE
          value: {{ include "mesh.path.token" . }}
        {{- with .Values.reconciler.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: metrics
          containerPort: {{ .Values.reconciler.port }}
      # The pod becomes Ready once the first pass has succeeded (/readyz: records valid,
      # bus reachable, users file and streams in place). After that, readiness follows
      # /healthz (the loop is alive) and not /readyz: invalid records or a failing pass must
      # not take the server out of the client Service (in a cluster, all pods at once);
      # those are alerted on instead (docs/runbook.md).
      startupProbe:
        httpGet:
          path: /readyz
          port: metrics
        periodSeconds: 5
        failureThreshold: 120
      livenessProbe:
        httpGet:
          path: /healthz
          port: metrics
        periodSeconds: 10
        timeoutSeconds: 5
        failureThreshold: 3
      readinessProbe:
        httpGet:
          path: /healthz
          port: metrics
        periodSeconds: 10
        timeoutSeconds: 5
        failureThreshold: 3
      securityContext:
        {{- include "mesh.containerSecurityContext" . | nindent 8 }}
      {{- with .Values.reconciler.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: mesh-secrets
          mountPath: {{ include "mesh.path.secretsDir" . }}
          readOnly: true
        {{- if include "mesh.usersFileManaged" . }}
        - name: users
          mountPath: {{ include "mesh.path.usersDir" . }}
        {{- end }}
        - name: pid
          mountPath: {{ include "mesh.path.pidDir" . }}
          readOnly: true
        {{- if eq (int .Values.replicas) 1 }}
        # MESH_RECONCILER_STORE_DIR: read, never written.
        - name: data
          mountPath: {{ include "mesh.path.dataDir" . }}
          readOnly: true
        {{- end }}
        {{- if .Values.tls.enabled }}
        - name: tls
          mountPath: {{ include "mesh.path.tlsDir" . }}
          readOnly: true
        {{- end }}
    {{- with .Values.extraContainers }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ $fullname }}-config
    {{- if include "mesh.usersFileManaged" . }}
    # In memory: the users file (bcrypt hashes) never reaches the node's disk.
    - name: users
      emptyDir:
        medium: Memory
        sizeLimit: 8Mi
    {{- end }}
    - name: pid
      emptyDir:
        medium: Memory
        sizeLimit: 1Mi
    - name: mesh-secrets
      projected:
        # 0440 (octal): readable by the pod's user and fsGroup only.
        defaultMode: 288
        sources:
          - secret:
              name: {{ include "mesh.recordsSecretName" . }}
              items:
                - key: {{ .Values.records.key }}
                  path: records.json
          - secret:
              name: {{ $password.name }}
              items:
                - key: {{ $password.key }}
                  path: password
          - secret:
              name: {{ $token.name }}
              items:
                - key: {{ $token.key }}
                  path: token
    {{- if .Values.tls.enabled }}
    - name: tls
      secret:
        secretName: {{ required "tls.existingSecret is required when tls.enabled" .Values.tls.existingSecret }}
        defaultMode: 288
    {{- end }}
    {{- if include "mesh.routeTls" . }}
    - name: route-tls
      secret:
        secretName: {{ include "mesh.routeTlsSecretName" . }}
        defaultMode: 288
    {{- end }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}
