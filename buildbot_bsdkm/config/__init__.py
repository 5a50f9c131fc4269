"""``bsdkm.yml`` read into typed settings: the file's own keys (``bsdkm_yml``), where wolfSSL comes
from (``sources``), each target's own options (``target_options``), the ``workers:`` block
(``workers``), the workers' trust levels (``worker_trust``) and kinds (``worker_kinds``), the
builders a master's workers allow (``builders``) and the file's JSON Schema for editors
(``json_schema``). Kept empty so a reader of one loads no other."""
