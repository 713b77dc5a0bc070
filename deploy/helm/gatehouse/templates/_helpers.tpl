{{/* Names, labels and the environment every Gatehouse container shares. */}}
{{/* 48 characters leave room for the longest suffix ("-migrate-" and a six-digit revision): Service and Job names
     must be DNS labels of at most 63 characters, and Helm accepts release names of up to 53. */}}
{{- define "gatehouse.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 48 | trimSuffix "-" -}}
{{- end -}}

{{- define "gatehouse.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gatehouse.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gatehouse.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Production without TLS on a listener fails at start (docs/tls.md "Production"); refuse such values at render time. */}}
{{- define "gatehouse.checks" -}}
{{- if eq .Values.environment "production" }}
{{- if and (not .Values.tls.httpOffload) (not .Values.tls.httpSecretName) }}
{{- fail "tls.httpSecretName: production needs TLS on the HTTP listeners: name a kubernetes.io/tls Secret in tls.httpSecretName, or set tls.httpOffload: true when an ingress terminates TLS (docs/tls.md \"Production\")" }}
{{- end }}
{{- if and .Values.gateway.pgEnabled (not .Values.tls.pgOffload) (not .Values.tls.pgSecretName) }}
{{- fail "tls.pgSecretName: production needs TLS on the PostgreSQL wire listener: name a kubernetes.io/tls Secret in tls.pgSecretName, or set tls.pgOffload: true when a TCP load balancer terminates TLS (docs/pgwire.md)" }}
{{- end }}
{{- end }}
{{- /* What values.schema.json cannot say: relations between two values. */}}
{{- if and .Values.tls.gatewayClientCaSecretName (not .Values.tls.httpSecretName) }}
{{- fail "tls.gatewayClientCaSecretName: client certificates are checked by the gateway's own TLS: it needs tls.httpSecretName too (docs/tls.md)" }}
{{- end }}
{{- $gwMin := ternary .Values.gateway.autoscaling.minReplicas .Values.gateway.replicas .Values.gateway.autoscaling.enabled }}
{{- include "gatehouse.pdbCheck" (dict "name" "gateway" "pdb" .Values.gateway.pdb.minAvailable "replicas" $gwMin "from" (ternary "gateway.autoscaling.minReplicas" "gateway.replicas" .Values.gateway.autoscaling.enabled)) }}
{{- include "gatehouse.pdbCheck" (dict "name" "admin" "pdb" .Values.admin.pdb.minAvailable "replicas" .Values.admin.replicas "from" "admin.replicas") }}
{{- $as := .Values.gateway.autoscaling }}
{{- if and $as.enabled (lt (int $as.maxReplicas) (int $as.minReplicas)) }}
{{- fail (printf "gateway.autoscaling.maxReplicas: %d is below gateway.autoscaling.minReplicas (%d)" (int $as.maxReplicas) (int $as.minReplicas)) }}
{{- end }}
{{- if and .Values.gateway.pgEnabled (eq (int .Values.gateway.service.pgPort) (int .Values.gateway.service.httpPort)) }}
{{- fail (printf "gateway.service.pgPort: %d is also gateway.service.httpPort; the gateway Service needs a port for each listener" (int .Values.gateway.service.pgPort)) }}
{{- end }}
{{- end -}}

{{/* Settings that hold a secret or may embed one, as SERVICE_* names: src/config/schema.ts credentialUrlPaths and
     secretValuePaths; every SERVICE_*_REF (secretRefPaths) is one too. extraEnv would render their values into the
     Deployment, so only extraSecretEnv may set them (README.md "Secrets by reference"). */}}
{{- define "gatehouse.secretSettings" -}}
SERVICE_DATABASE__URL SERVICE_DATABASE__READ_URL SERVICE_DATABASE__DIRECT_URL SERVICE_REDIS__URL SERVICE_ADMIN__BOOTSTRAP_PASSWORD SERVICE_NOTIFICATIONS__SLACK_WEBHOOK_URL
{{- end -}}

{{/* A SERVICE_*_REF setting takes a reference, not the secret: extraSecretEnv puts the Secret's value into this
     variable and the setting becomes env:<it>, as the chart does for its own references. */}}
{{- define "gatehouse.refHolder" -}}
{{- if and (hasPrefix "SERVICE_" .) (hasSuffix "_REF" .) }}{{ printf "GATEHOUSE_%s" (. | trimPrefix "SERVICE_" | trimSuffix "_REF") }}{{ end }}
{{- end -}}

{{/* Gatehouse reads a SERVICE_ variable's key path case-blind (SERVICE_DATABASE__url is database.url), so a setting
     has many spellings; the checks below compare names, so a SERVICE_ name must be spelt in capitals, the one
     spelling they know. Takes (dict "name" N "where" W). */}}
{{- define "gatehouse.oneSpelling" -}}
{{- if and (hasPrefix "SERVICE_" .name) (ne .name (upper .name)) }}
{{- fail (printf "%s: %s names the setting %s in lower case; Gatehouse reads it as %s, which the chart checks only spelt %s" .where .name (.name | trimPrefix "SERVICE_" | lower | replace "__" ".") (upper .name) (upper .name)) }}
{{- end }}
{{- end -}}

{{/* Refuses extraEnv and extraSecretEnv entries that would put a secret in the Deployment or set a variable twice.
     Takes (dict "root" $ "taken" D), D mapping each variable the chart sets to where it comes from. */}}
{{- define "gatehouse.extraEnvChecks" -}}
{{- $v := .root.Values -}}
{{- $taken := .taken -}}
{{- $secretSettings := include "gatehouse.secretSettings" . | splitList " " -}}
{{- range $name, $value := $v.extraEnv }}
{{- include "gatehouse.oneSpelling" (dict "name" $name "where" (printf "extraEnv.%s" $name)) }}
{{- if or (has $name $secretSettings) (include "gatehouse.refHolder" $name) }}
{{- fail (printf "extraEnv.%s: %s holds a secret or credentials and extraEnv would write it into the Deployment; pass it from a Secret with extraSecretEnv: [{name: %s, secretName, key}] (deploy/helm/gatehouse/README.md \"Secrets by reference\")" $name ($name | trimPrefix "SERVICE_" | lower | replace "__" ".") $name) }}
{{- end }}
{{- if hasKey $taken $name }}
{{- fail (printf "extraEnv.%s: already set by %s; a variable is set once" $name (get $taken $name)) }}
{{- end }}
{{- /* The URL forms src/config/secrets.ts masks: userinfo, or a credential-bearing query parameter. */}}
{{- if regexMatch "(?i)^[a-z][a-z0-9+.-]*://([^/?#]*@|[^#]*[?&][^=&#]*(pass|secret|token|key)[^=&#]*=)" (toString $value) }}
{{- fail (printf "extraEnv.%s: a URL with credentials (userinfo or a password, token or key parameter); pass it from a Secret with extraSecretEnv (deploy/helm/gatehouse/README.md \"Secrets by reference\")" $name) }}
{{- end }}
{{- $_ := set $taken $name (printf "extraEnv.%s" $name) }}
{{- end }}
{{- range $i, $e := $v.extraSecretEnv }}
{{- include "gatehouse.oneSpelling" (dict "name" $e.name "where" (printf "extraSecretEnv[%d].name" $i)) }}
{{- $holder := include "gatehouse.refHolder" $e.name }}
{{- range $n := compact (list $e.name $holder) }}
{{- if hasKey $taken $n }}
{{- fail (printf "extraSecretEnv[%d].name: %s is already set by %s; a variable is set once" $i $n (get $taken $n)) }}
{{- end }}
{{- $_ := set $taken $n (printf "extraSecretEnv[%d]" $i) }}
{{- end }}
{{- end }}
{{- end -}}

{{/* HTTPS on a role's HTTP listener: the gateway and the admin serve it with tls.httpSecretName. */}}
{{- define "gatehouse.httpScheme" -}}
{{- if and .root.Values.tls.httpSecretName (has .role (list "gateway" "admin")) }}HTTPS{{ else }}HTTP{{ end }}
{{- end -}}

{{/* Secrets by reference (secretKeyRef) and the non-secret configuration as SERVICE_* variables (spec §9). Takes
     (dict "root" $ "role" R): a certificate file is named only where the role serves its listener, and only there
     mounted (gatehouse.volumeMounts). */}}
{{- define "gatehouse.env" -}}
{{- $v := .root.Values -}}
{{- include "gatehouse.checks" .root -}}
{{- $chartEnv := include "gatehouse.chartEnv" . -}}
{{- /* SERVICE_SERVICE_ROLE: the migration Job adds it; the other roles take theirs from --role. */}}
{{- $taken := dict "SERVICE_SERVICE_ROLE" "the chart, from each pod's role" -}}
{{- range fromYamlArray $chartEnv }}{{ $_ := set $taken .name "the chart, from its values (README.md \"Values\")" }}{{ end -}}
{{- include "gatehouse.extraEnvChecks" (dict "root" .root "taken" $taken) -}}
{{ $chartEnv }}
{{- range $name, $value := $v.extraEnv }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- range $v.extraSecretEnv }}
{{- $holder := include "gatehouse.refHolder" .name }}
- name: {{ $holder | default .name }}
  valueFrom: { secretKeyRef: { name: {{ .secretName }}, key: {{ .key }} } }
{{- if $holder }}
- name: {{ .name }}
  value: {{ printf "env:%s" $holder | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The variables the chart sets from its own values, as gatehouse.env takes them. */}}
{{- define "gatehouse.chartEnv" -}}
{{- $v := .root.Values -}}
- name: SERVICE_ENVIRONMENT
  value: {{ $v.environment | quote }}
- name: SERVICE_GATEWAY__HOST
  value: "0.0.0.0"
- name: SERVICE_ADMIN__HOST
  value: "0.0.0.0"
- name: SERVICE_DATABASE__URL
  valueFrom: { secretKeyRef: { name: {{ $v.secrets.name }}, key: {{ $v.secrets.keys.databaseUrl }} } }
- name: SERVICE_DATABASE__SSL_MODE
  value: verify-full
- name: SERVICE_DATABASE__SSL_CA_FILE
  value: /etc/gatehouse/db-ca/ca.crt
- name: SERVICE_DATABASE__MIGRATE_ON_START
  value: "false"
- name: SERVICE_REDIS__URL
  valueFrom: { secretKeyRef: { name: {{ $v.secrets.name }}, key: {{ $v.secrets.keys.redisUrl }} } }
- name: GATEHOUSE_SIGNING_SECRET
  valueFrom: { secretKeyRef: { name: {{ $v.secrets.name }}, key: {{ $v.secrets.keys.signingSecret }} } }
- name: SERVICE_ADMIN__SIGNING_SECRET_REF
  value: env:GATEHOUSE_SIGNING_SECRET
- name: GATEHOUSE_API_KEY_PEPPER
  valueFrom: { secretKeyRef: { name: {{ $v.secrets.name }}, key: {{ $v.secrets.keys.apiKeyPepper }} } }
- name: SERVICE_AUTH__API_KEY_PEPPER_REF
  value: env:GATEHOUSE_API_KEY_PEPPER
- name: GATEHOUSE_BOOTSTRAP_PASSWORD
  valueFrom: { secretKeyRef: { name: {{ $v.secrets.name }}, key: {{ $v.secrets.keys.bootstrapPassword }} } }
- name: SERVICE_ADMIN__BOOTSTRAP_PASSWORD
  value: env:GATEHOUSE_BOOTSTRAP_PASSWORD
- name: SERVICE_ADMIN__COOKIE__SECURE
  value: "true"
- name: SERVICE_AUDIT__DURABILITY_MODE
  value: strict
- name: SERVICE_AUDIT__SPOOL__DIR
  value: /var/lib/gatehouse/audit-spool
- name: SERVICE_AUDIT__SPOOL__MAX_BYTES
  value: {{ int64 $v.spool.maxBytes | quote }}
- name: SERVICE_GATEWAY__TLS__TRUSTED_TLS_OFFLOAD
  value: {{ $v.tls.httpOffload | quote }}
- name: SERVICE_ADMIN__TLS__TRUSTED_TLS_OFFLOAD
  value: {{ $v.tls.httpOffload | quote }}
{{- if and $v.tls.httpSecretName (eq .role "gateway") }}
- name: SERVICE_GATEWAY__TLS__CERT_FILE
  value: /etc/gatehouse/http-tls/tls.crt
- name: SERVICE_GATEWAY__TLS__KEY_FILE
  value: /etc/gatehouse/http-tls/tls.key
{{- if $v.tls.gatewayClientCaSecretName }}
- name: SERVICE_GATEWAY__TLS__CLIENT_CA_FILE
  value: /etc/gatehouse/http-client-ca/ca.crt
{{- end }}
{{- end }}
{{- if and $v.tls.httpSecretName (eq .role "admin") }}
- name: SERVICE_ADMIN__TLS__CERT_FILE
  value: /etc/gatehouse/http-tls/tls.crt
- name: SERVICE_ADMIN__TLS__KEY_FILE
  value: /etc/gatehouse/http-tls/tls.key
{{- end }}
- name: SERVICE_GATEWAY__PG_ENABLED
  value: {{ $v.gateway.pgEnabled | quote }}
- name: SERVICE_GATEWAY__PG_TLS__TRUSTED_TLS_OFFLOAD
  value: {{ $v.tls.pgOffload | quote }}
{{- if and $v.tls.pgSecretName $v.gateway.pgEnabled (eq .role "gateway") }}
- name: SERVICE_GATEWAY__PG_TLS__CERT_FILE
  value: /etc/gatehouse/pg-tls/tls.crt
- name: SERVICE_GATEWAY__PG_TLS__KEY_FILE
  value: /etc/gatehouse/pg-tls/tls.key
- name: SERVICE_GATEWAY__PG_TLS__REQUIRE_CLIENT_TLS
  value: "true"
{{- end }}
- name: SERVICE_GATEWAY__TIMEOUTS__SHUTDOWN_GRACE_MS
  value: {{ mul $v.gateway.shutdownGraceSeconds 1000 | quote }}
{{- end -}}

{{/* Takes (dict "root" $ "role" R), as gatehouse.env: TLS keys are mounted only into the role that serves them. */}}
{{- define "gatehouse.volumeMounts" -}}
{{- $v := .root.Values -}}
- { name: tmp, mountPath: /tmp }
- { name: spool, mountPath: /var/lib/gatehouse }
- { name: db-ca, mountPath: /etc/gatehouse/db-ca, readOnly: true }
{{- if and $v.tls.httpSecretName (has .role (list "gateway" "admin")) }}
- { name: http-tls, mountPath: /etc/gatehouse/http-tls, readOnly: true }
{{- if and $v.tls.gatewayClientCaSecretName (eq .role "gateway") }}
- { name: http-client-ca, mountPath: /etc/gatehouse/http-client-ca, readOnly: true }
{{- end }}
{{- end }}
{{- if and $v.tls.pgSecretName $v.gateway.pgEnabled (eq .role "gateway") }}
- { name: pg-tls, mountPath: /etc/gatehouse/pg-tls, readOnly: true }
{{- end }}
{{- end -}}

{{- define "gatehouse.volumes" -}}
{{- $v := .root.Values -}}
- name: tmp
  emptyDir: {}
- name: spool
  emptyDir: { sizeLimit: {{ add (int64 $v.spool.maxBytes) 33554432 }} }
- name: db-ca
  secret:
    secretName: {{ $v.secrets.databaseCa.name }}
    items: [{ key: {{ $v.secrets.databaseCa.key }}, path: ca.crt }]
{{- if and $v.tls.httpSecretName (has .role (list "gateway" "admin")) }}
- name: http-tls
  secret: { secretName: {{ $v.tls.httpSecretName }} }
{{- if and $v.tls.gatewayClientCaSecretName (eq .role "gateway") }}
- name: http-client-ca
  secret: { secretName: {{ $v.tls.gatewayClientCaSecretName }}, items: [{ key: ca.crt, path: ca.crt }] }
{{- end }}
{{- end }}
{{- if and $v.tls.pgSecretName $v.gateway.pgEnabled (eq .role "gateway") }}
- name: pg-tls
  secret: { secretName: {{ $v.tls.pgSecretName }} }
{{- end }}
{{- end -}}

{{- define "gatehouse.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
securityContext: {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
A PodDisruptionBudget whose minAvailable is every pod allows no voluntary eviction: a node drain or a cluster upgrade
waits forever. A count is compared with the pods; a percentage keeps its share of them rounded up, as Kubernetes
rounds it ("60%" of 2 pods keeps both). Refused at render, naming the values (README "Values schema").
*/}}
{{- define "gatehouse.pdbCheck" -}}
{{- $replicas := int .replicas }}
{{- if kindIs "string" .pdb }}
{{- $share := trimSuffix "%" .pdb | int }}
{{- $keep := div (add (mul $share $replicas) 99) 100 }}
{{- if and (gt $keep 0) (ge $keep $replicas) }}
{{- fail (printf "%s.pdb.minAvailable: \"%s\" keeps %d of the %d pods of %s, so no voluntary eviction is allowed (a node drain never completes); use a smaller share or a count below %d" .name .pdb $keep $replicas .from $replicas) }}
{{- end }}
{{- else if and (gt (int .pdb) 0) (ge (int .pdb) $replicas) }}
{{- fail (printf "%s.pdb.minAvailable: %d is not below %s (%d), so no voluntary eviction is allowed (a node drain never completes); use %d or less" .name (int .pdb) .from $replicas (sub $replicas 1)) }}
{{- end }}
{{- end -}}
