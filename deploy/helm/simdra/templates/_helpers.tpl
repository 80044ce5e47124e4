{{/* The release's name: the prefix of every object name and its app.kubernetes.io/name
label (`name`; simdra by default, as deploy/base names them). */}}
{{- define "simdra.name" -}}
{{ .Values.name }}
{{- end }}

{{/* Labels every object carries (the same as deploy/base). */}}
{{- define "simdra.labels" -}}
app.kubernetes.io/name: {{ include "simdra.name" . }}
{{- end }}

{{/* Labels of the kubelet plugin's objects; also the DaemonSet's selector. */}}
{{- define "simdra.pluginLabels" -}}
app.kubernetes.io/name: {{ include "simdra.name" . }}
app.kubernetes.io/component: kubelet-plugin
{{- end }}

{{/* Every namespaced object goes into the release namespace. */}}
{{- define "simdra.namespace" -}}
{{ .Release.Namespace }}
{{- end }}

{{/* priorityClassName: the value, else system-node-critical only in kube-system (where
clusters admit it by default), else none. */}}
{{- define "simdra.priorityClassName" -}}
{{- if .Values.priorityClassName -}}
{{ .Values.priorityClassName }}
{{- else if eq .Release.Namespace "kube-system" -}}
system-node-critical
{{- end }}
{{- end }}

{{/* The plugin's own directory under the kubelet's plugins directory (DRA socket, claim
state): the only part of it the pod mounts. */}}
{{- define "simdra.pluginsDir" -}}
/var/lib/kubelet/plugins
{{- end }}

{{/* The plugin's ServiceAccount; the admission policy and the bindings name it. */}}
{{- define "simdra.serviceAccount" -}}
{{ include "simdra.name" . }}-kubelet-plugin
{{- end }}

{{/* The driver name the plugin registers and publishes under (DRIVER_NAME); its sockets,
state directory, CDI spec files and DeviceClasses are named after it. */}}
{{- define "simdra.driverName" -}}
{{ .Values.driverName }}
{{- end }}

{{- define "simdra.inventoryDir" -}}
/etc/simdra
{{- end }}

{{- define "simdra.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}

{{/* Labels of the fleet's objects (fleet.enabled); also its Deployment's selector. */}}
{{- define "simdra.fleetLabels" -}}
app.kubernetes.io/name: {{ include "simdra.name" . }}
app.kubernetes.io/component: fleet
{{- end }}
