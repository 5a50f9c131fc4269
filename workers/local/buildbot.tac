# A bsdkm-ci worker: runs `bsdkm-ci stage ...` for the master named in `worker.json`.
# `scripts/master.sh up` (the embedded local worker) and `bsdkm-ci init worker` copy this file into
# the worker's directory next to `worker.json` (master host and port, worker name) and `password`
# (mode 600), so no secret is ever in a command line or in this repository.
import json
import os
import sys

from buildbot_worker.bot import Worker
from twisted.application import service
from twisted.python.log import FileLogObserver, ILogObserver
from twisted.python.logfile import LogFile

basedir = os.path.abspath(os.path.dirname(__file__))
with open(os.path.join(basedir, "worker.json"), encoding="utf-8") as f:
    settings = json.load(f)
with open(os.path.join(basedir, "password"), encoding="utf-8") as f:
    password = f.read().strip()

# The steps run `bsdkm-ci`: the one installed beside this worker, whatever PATH it was started with.
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "/usr/bin:/bin")])

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
