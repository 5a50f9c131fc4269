# The embedded local worker: runs `bsdkm-ci stage ...` on this machine for the local master.
# `scripts/master.sh up` copies this file into the worker's directory next to `worker.json`
# (master port, worker name) and `password` (mode 600), so no secret is ever in a command
# line or in this repository.
import json
import os

from buildbot_worker.bot import Worker
from twisted.application import service
from twisted.python.log import FileLogObserver, ILogObserver
from twisted.python.logfile import LogFile

basedir = os.path.abspath(os.path.dirname(__file__))
with open(os.path.join(basedir, "worker.json"), encoding="utf-8") as f:
    settings = json.load(f)
with open(os.path.join(basedir, "password"), encoding="utf-8") as f:
    password = f.read().strip()

application = service.Application('buildbot-worker')  # buildbot-worker checks this spelling
logfile = LogFile.fromFullPath(
    os.path.join(basedir, "twistd.log"), rotateLength=10_000_000, maxRotatedFiles=3
)
application.setComponent(ILogObserver, FileLogObserver(logfile).emit)

worker = Worker(
    settings.get("master_host", "127.0.0.1"),
    int(settings["master_port"]),
    settings["name"],
    password,
    basedir,
    keepalive=60,
    umask=0o22,
    maxdelay=5,  # reconnect quickly after the local master restarts
    numcpus=None,
    allow_shutdown=None,
    maxRetries=None,
    protocol="pb",
    delete_leftover_dirs=False,
)
worker.setServiceParent(application)
