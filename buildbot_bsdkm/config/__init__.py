"""``bsdkm.yml`` read into typed settings: the file's own keys (``bsdkm_yml``), the ``workers:`` block
(``workers``), the workers' trust levels (``worker_trust``) and kinds (``worker_kinds``), and the
builders a master's workers allow (``builders``). Kept empty so a reader of one loads no other."""
