"""Small helpers every layer may use and that know nothing of wolfSSL: the one YAML reader
(``yaml_reader``) and the tables it reads sections with, which are their JSON Schema too
(``yaml_schema``), the runtime data shipped in the package (``resources``) and credential redaction
(``redact``)."""
