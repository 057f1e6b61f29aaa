{{/*
Base of every resource name: fullnameOverride, else the release name. Pods are then
<base>-controller-<i> and <base>-<group>-<i> (docs/architecture.md §3 peer names).
*/}}
{{- define "mqha.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trimSuffix "-" -}}
{{- end -}}

{{/* A StatefulSet name, checked: its pods get a controller-revision-hash label "<name>-<10 chars>". */}}
{{- define "mqha.stsName" -}}
{{- if gt (len .) 52 -}}
{{- fail (printf "resource name %q is %d characters, more than the 52 a StatefulSet allows: use a shorter release name, fullnameOverride or broker group name" . (len .)) -}}
{{- end -}}
{{- . -}}
{{- end -}}

{{- define "mqha.controllerName" -}}
{{- include "mqha.stsName" (printf "%s-controller" (include "mqha.fullname" .)) -}}
{{- end -}}

{{- define "mqha.controllerHeadless" -}}
{{- printf "%s-headless" (include "mqha.controllerName" .) -}}
{{- end -}}

{{/* ".<namespace>.svc" plus ".<clusterDomain>" when set. */}}
{{- define "mqha.svcSuffix" -}}
{{- printf "%s.svc" .Release.Namespace -}}
{{- with .Values.clusterDomain }}.{{ . }}{{ end -}}
{{- end -}}

{{/* Stable DNS name of controller pod i: dict "root" $ "i" i */}}
{{- define "mqha.controllerHost" -}}
{{- printf "%s-%d.%s.%s" (include "mqha.controllerName" .root) (int .i) (include "mqha.controllerHeadless" .root) (include "mqha.svcSuffix" .root) -}}
{{- end -}}

{{/* controllerDLegerPeers: n0-host:port;n1-host:port;... (API addresses). */}}
{{- define "mqha.controllerPeers" -}}
{{- $peers := list -}}
{{- range $i := until (int .Values.controller.replicas) -}}
{{- $peers = append $peers (printf "n%d-%s:%d" $i (include "mqha.controllerHost" (dict "root" $ "i" $i)) (int $.Values.controller.port)) -}}
{{- end -}}
{{- join ";" $peers -}}
{{- end -}}

{{/* The controllers' API addresses, ';'-separated: brokers' controllerAddr and mqadmin -a. */}}
{{- define "mqha.controllerAddr" -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.controller.replicas) -}}
{{- $addrs = append $addrs (printf "%s:%d" (include "mqha.controllerHost" (dict "root" $ "i" $i)) (int $.Values.controller.port)) -}}
{{- end -}}
{{- join ";" $addrs -}}
{{- end -}}

{{/* Broker group StatefulSet name: dict "root" $ "group" group */}}
{{- define "mqha.brokerStsName" -}}
{{- include "mqha.stsName" (printf "%s-%s" (include "mqha.fullname" .root) .group.name) -}}
{{- end -}}

{{- define "mqha.brokerHeadless" -}}
{{- printf "%s-headless" (include "mqha.brokerStsName" .) -}}
{{- end -}}

{{/* The mqproxy Deployment and its Service (the clients' access point). */}}
{{- define "mqha.proxyName" -}}
{{- include "mqha.stsName" (printf "%s-proxy" (include "mqha.fullname" .)) -}}
{{- end -}}

{{- define "mqha.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "mqha.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mqha.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "mqha.controllerLabels" -}}
{{ include "mqha.labels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* dict "root" $ "group" group */}}
{{- define "mqha.brokerLabels" -}}
{{ include "mqha.labels" .root }}
app.kubernetes.io/component: broker
mqha.io/broker-group: {{ .group.name }}
{{- end -}}

{{- define "mqha.proxyLabels" -}}
{{ include "mqha.labels" . }}
app.kubernetes.io/component: proxy
{{- end -}}

{{- define "mqha.proxySelectorLabels" -}}
{{ include "mqha.selectorLabels" . }}
app.kubernetes.io/component: proxy
{{- end -}}

{{- define "mqha.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mqha.controllerSelectorLabels" -}}
{{ include "mqha.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* dict "root" $ "group" group */}}
{{- define "mqha.brokerSelectorLabels" -}}
{{ include "mqha.selectorLabels" .root }}
app.kubernetes.io/component: broker
mqha.io/broker-group: {{ .group.name }}
{{- end -}}

{{/*
Java-properties lines of a map, keys sorted. Helm reads every number as a float: integers are
printed as integers (1073741824, not 1.073741824e+09); the schema admits no fractional value.
*/}}
{{- define "mqha.properties" -}}
{{- range $key := keys . | sortAlpha }}
{{- $value := get $ $key }}
{{ $key }}={{ if or (kindIs "bool" $value) (kindIs "string" $value) }}{{ $value }}{{ else }}{{ $value | int64 }}{{ end }}
{{- end }}
{{- end -}}

{{/* The rendered controller.conf (without controllerDLegerSelfId and secrets: run.sh appends them). */}}
{{- define "mqha.controllerConf" -}}
# mqha controller config, rendered by the chart. At start run.sh appends controllerDLegerSelfId
# (n<pod ordinal>) and the secrets in use (adminAuthToken, controllerRaftPassword,
# innerClientAuthenticationCredentials) from the Secret.
{{- $managed := dict
    "controllerDLegerGroup" .Values.controller.group
    "controllerDLegerPeers" (include "mqha.controllerPeers" .)
    "controllerRaftPortOffset" .Values.controller.raftPortOffset
    "controllerStorePath" "/var/lib/mqha/controller"
    "configStorePath" "/var/lib/mqha/controller/controller.properties"
    "authenticationEnabled" .Values.auth.enabled
}}
{{- include "mqha.properties" $managed }}
{{- with .Values.controller.config }}
# from values: controller.config
{{- include "mqha.properties" . }}
{{- end }}
{{ end -}}

{{/* The rendered broker.conf of a group (brokerIP1 and the secrets are appended by run.sh). */}}
{{- define "mqha.brokerConf" -}}
{{- $root := .root -}}
{{- $group := .group -}}
# mqha broker config of group {{ $group.name }}, rendered by the chart. At start run.sh appends
# brokerIP1 (the pod's address) and the secrets in use (adminAuthToken,
# innerClientAuthenticationCredentials, initAuthenticationUser) from the Secret.
{{- $managed := dict
    "brokerClusterName" $root.Values.broker.clusterName
    "brokerName" $group.name
    "listenPort" $root.Values.broker.listenPort
    "haListenPort" $root.Values.broker.haListenPort
    "enableControllerMode" true
    "controllerAddr" (include "mqha.controllerAddr" $root)
    "storePathRootDir" "/var/lib/mqha/store"
    "authenticationEnabled" $root.Values.auth.enabled
}}
{{- include "mqha.properties" $managed }}
{{- $config := dict "totalReplicas" (int $group.replicas) }}
{{- range $k, $v := $root.Values.broker.config | default dict }}{{ $_ := set $config $k $v }}{{ end }}
{{- range $k, $v := $group.config | default dict }}{{ $_ := set $config $k $v }}{{ end }}
# from values: broker.config, brokerGroups[{{ $group.name }}].config (totalReplicas defaults to the replica count)
{{- include "mqha.properties" $config }}
{{ end -}}

{{/* The rendered proxy.conf (the secrets are appended by run.sh). */}}
{{- define "mqha.proxyConf" -}}
# mqproxy config, rendered by the chart. At start run.sh appends the secrets in use
# (innerClientAuthenticationCredentials, initAuthenticationUser) from the Secret.
{{- $managed := dict
    "controllerAddr" (include "mqha.controllerAddr" .)
    "grpcServerPort" .Values.proxy.grpcServerPort
    "authenticationEnabled" .Values.auth.enabled
}}
{{- include "mqha.properties" $managed }}
{{- $config := dict }}
{{- with (.Values.broker.config | default dict).maxMessageSize }}{{ $_ := set $config "maxMessageSize" . }}{{ end }}
{{- range $k, $v := .Values.proxy.config | default dict }}{{ $_ := set $config $k $v }}{{ end }}
{{- with $config }}
# from values: proxy.config (maxMessageSize defaults to broker.config's)
{{- include "mqha.properties" . }}
{{- end }}
{{ end -}}

{{- define "mqha.secretName" -}}
{{- printf "%s-auth" (include "mqha.fullname" .) -}}
{{- end -}}

{{/*
The secrets in use, as JSON: config key -> {"env": variable run.sh reads, "controller"/"broker"/"proxy":
which pods get it (mqproxy puts as the brokers' user and commits offsets with the inner credentials), "json": its two JSON fields or absent}. adminAuthToken and controllerRaftPassword follow
their own `enabled`; the credentials and the user exist only with auth.enabled (authenticationEnabled).
*/}}
{{- define "mqha.authItems" -}}
{{- $auth := .Values.auth -}}
{{- $items := dict -}}
{{- if $auth.adminAuthToken.enabled -}}
{{- $_ := set $items "adminAuthToken" (dict "env" "MQHA_ADMIN_TOKEN" "controller" true "broker" true "aclJob" true) -}}
{{- end -}}
{{- if $auth.controllerRaftPassword.enabled -}}
{{- $_ := set $items "controllerRaftPassword" (dict "env" "MQHA_RAFT_PASSWORD" "controller" true "broker" false) -}}
{{- end -}}
{{- if $auth.enabled -}}
{{- if not $auth.adminAuthToken.enabled -}}
{{- fail "auth.enabled is true: controllers then require adminAuthToken, so auth.adminAuthToken.enabled must be true too" -}}
{{- end -}}
{{- $_ := set $items "innerClientAuthenticationCredentials" (dict "env" "MQHA_INNER_CREDENTIALS" "controller" true "broker" true "proxy" true "json" (list "accessKey" "secretKey") "generatedName" "mqha-inner") -}}
{{- $_ := set $items "initAuthenticationUser" (dict "env" "MQHA_INIT_USER" "controller" false "broker" true "proxy" true "aclJob" true "json" (list "username" "password") "generatedName" "mqha") -}}
{{- end -}}
{{- toJson $items -}}
{{- end -}}

{{/*
The value given for secret `name` checked as mqha checks it at start (mqha/security/credentials.py),
so a bad value stops `helm install` instead of crash-looping the pods: dict "name" .. "value" .. "item" ..
*/}}
{{- define "mqha.checkSecretValue" -}}
{{- $where := printf "auth.%s.value" .name -}}
{{- if .item.json -}}
{{- $public := index .item.json 0 -}}
{{- $secret := index .item.json 1 -}}
{{- $parsed := fromJson .value -}}
{{- if or (hasKey $parsed "Error") (ne (keys $parsed | sortAlpha | toJson) (list $public $secret | sortAlpha | toJson)) -}}
{{- fail (printf "%s must be one line of JSON {\"%s\": ..., \"%s\": ...} with exactly these fields" $where $public $secret) -}}
{{- end -}}
{{- $p := get $parsed $public -}}
{{- if or (not (kindIs "string" $p)) (not $p) (contains ":" $p) -}}
{{- fail (printf "%s: field %q must be a non-empty string without ':'" $where $public) -}}
{{- end -}}
{{- $s := get $parsed $secret -}}
{{- if or (not (kindIs "string" $s)) (lt (len $s) 8) -}}
{{- fail (printf "%s: field %q must be a string of 8+ characters" $where $secret) -}}
{{- end -}}
{{- else if lt (len .value) 8 -}}
{{- fail (printf "%s must be at least 8 characters (a guessable secret protects nothing)" $where) -}}
{{- end -}}
{{- end -}}

{{/*
The data of Secret <fullname>-auth: each secret in use without an existingSecret, base64, from its
value, else from the Secret as the cluster has it now (`lookup`: upgrades keep generated values), else
generated. `lookup` is empty in `helm template` and dry runs: they show fresh values.
*/}}
{{- define "mqha.secretData" -}}
{{- $auth := .Values.auth -}}
{{- $current := (lookup "v1" "Secret" .Release.Namespace (include "mqha.secretName" .)).data | default dict -}}
{{- $data := dict -}}
{{- range $name, $item := include "mqha.authItems" . | fromJson -}}
{{- $values := get $auth $name -}}
{{- if not $values.existingSecret -}}
{{- if $values.value -}}
{{- include "mqha.checkSecretValue" (dict "name" $name "value" $values.value "item" $item) -}}
{{- $_ := set $data $values.secretKey ($values.value | b64enc) -}}
{{- else if hasKey $current $values.secretKey -}}
{{- $_ := set $data $values.secretKey (get $current $values.secretKey) -}}
{{- else if $item.json -}}
{{- $generated := dict (index $item.json 0) $item.generatedName (index $item.json 1) (randAlphaNum 32) -}}
{{- $_ := set $data $values.secretKey ($generated | toJson | b64enc) -}}
{{- else -}}
{{- $_ := set $data $values.secretKey (randAlphaNum 32 | b64enc) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $data -}}
{{- end -}}

{{/* Env entries for the secrets: dict "root" $ "component" "controller"|"broker"|"proxy" */}}
{{- define "mqha.secretEnv" -}}
{{- $auth := .root.Values.auth -}}
{{- $component := .component -}}
{{- range $name, $item := include "mqha.authItems" .root | fromJson }}
{{- if get $item $component }}
{{- $values := get $auth $name }}
- name: {{ $item.env }}
  valueFrom:
    secretKeyRef:
      name: {{ $values.existingSecret | default (include "mqha.secretName" $.root) }}
      key: {{ $values.secretKey }}
{{- end }}
{{- end }}
{{- end -}}

{{/* An HTTP probe: dict "path" /livez|/healthz "timings" <a map of probe fields>. Liveness and
startup ask /livez (the process answers), readiness /healthz (503 for a damaged node: a restart
would not mend it, so it must not be a liveness failure). */}}
{{- define "mqha.probe" -}}
{{- $timings := .timings -}}
httpGet:
  path: {{ .path }}
  port: http
{{- range $key := keys $timings | sortAlpha }}
{{ $key }}: {{ get $timings $key | int }}
{{- end }}
{{- end -}}

{{/* Probe timings of a process without an HTTP port (mqproxy): a TCP connect to its gRPC port. */}}
{{- define "mqha.tcpProbe" -}}
tcpSocket:
  port: grpc
{{- range $key := keys . | sortAlpha }}
{{ $key }}: {{ get $ $key | int }}
{{- end }}
{{- end -}}

{{/* Pod anti-affinity: dict "mode" soft|hard|none "labels" <selector labels map> */}}
{{- define "mqha.antiAffinity" -}}
{{- if eq .mode "hard" }}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- toYaml .labels | nindent 10 }}
{{- else if eq .mode "soft" }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- toYaml .labels | nindent 12 }}
{{- end }}
{{- end -}}

{{/* volumeClaimTemplates entry or nothing: a persistence map */}}
{{- define "mqha.volumeClaim" -}}
- metadata:
    name: data
  spec:
    accessModes:
      {{- toYaml .accessModes | nindent 6 }}
    {{- if .storageClass }}
    storageClassName: {{ if eq .storageClass "-" }}""{{ else }}{{ .storageClass | quote }}{{ end }}
    {{- end }}
    resources:
      requests:
        storage: {{ .size | quote }}
{{- end -}}
