"""``bsdkm.yml`` read into typed settings: the file's own keys (``bsdkm_yml``), the ``workers:`` block
(``workers``) and the workers' trust levels (``worker_trust``). Kept empty so a reader of one loads no
other."""
