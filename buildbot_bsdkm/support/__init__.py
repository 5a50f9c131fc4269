"""Small helpers every layer may use and that know nothing of wolfSSL: the one YAML reader
(``yaml_reader``), the runtime data shipped in the package (``resources``) and credential redaction
(``redact``)."""
