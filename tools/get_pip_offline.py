"""Offline stand-in for ansible-test's get-pip bootstrap script.

ansible-test downloads get-pip from a host these machines cannot reach, unless a copy sits in
~/.ansible/test/cache/. This stand-in gives the same result from what is already here:
ensurepip, then pip installs the requested packages from the reachable package index.
"""

import subprocess
import sys

DROPPED = {"--no-setuptools", "--no-wheel"}  # get-pip flags that plain pip does not know

subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"])
args = [a for a in sys.argv[1:] if a not in DROPPED]
subprocess.check_call([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *args])
