{{/* Labels every object carries (the same as deploy/base). */}}
{{- define "simdra.labels" -}}
app.kubernetes.io/name: simdra
{{- end }}

{{/* Labels of the kubelet plugin's objects; also the DaemonSet's selector. */}}
{{- define "simdra.pluginLabels" -}}
app.kubernetes.io/name: simdra
app.kubernetes.io/component: kubelet-plugin
{{- end }}

{{- define "simdra.namespace" -}}
{{ .Values.namespace.name }}
{{- end }}

{{/* The plugin's ServiceAccount; the admission policy and the bindings name it. */}}
{{- define "simdra.serviceAccount" -}}
simdra-kubelet-plugin
{{- end }}

{{/* The driver name the plugin registers and publishes under (DRIVER_NAME). */}}
{{- define "simdra.driverName" -}}
dra.example.com
{{- end }}

{{- define "simdra.inventoryDir" -}}
/etc/simdra
{{- end }}

{{- define "simdra.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}
