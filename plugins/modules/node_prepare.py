#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: node_prepare
short_description: One node's whole preflight in one task, every node checked at once
version_added: 0.1.0
description:
  - "Refuses a job that sees part of the cluster (a --limit or an AWX slice) before touching any node."
  - "Probes the node with M(aorta.cluster.node_probe) and judges the answer on the controller: docker,
    the image, the checkout's files, free disk, GPU devices, the fabric interface holding the node's
    C(vpc_ip), and the node's lease for this run."
  - "A node without the image gets it in the same probe, with no remote command more: with
    C(aorta_image_archive), the archive must exist on the controller and hold the image (its index is read
    there, nothing is copied); otherwise C(docker pull) starts in the probe and preflight fails with docker's
    own error line when the registry says no, or when it gives no answer within 60 seconds. A pull under way
    goes on on the node and the launch's own pull joins it. With C(aorta_image_pull=never) the node fails
    instead. Not pulled in check mode."
  - "A failed node's C(msg) is its first failure and how many more there are; C(failures) holds every one."
  - "Every node runs its own checks at once, the head's failure included: a dead or unhealthy node is
    named in the same pass as any other. The head also takes its lease and picks the rendezvous port on
    itself. A worker that passed its own checks waits for the head's verdict (a file in the results
    directory's C(.plan)), then takes its lease and proves one TCP connection from its own address on the
    interface gloo will use to the head's address and port (a second, short module run). The leases wait
    for the head: of two runs started together, only the one that holds the head goes on to the workers.
    A worker that stopped another run's leftovers when it took its lease is checked again, whole."
  - "Reads the C(aorta_*) variables itself (see C(docs/variables.md)); the play lists the role
    C(aorta.cluster.defaults) for their defaults. A node that does not answer within
    C(aorta_connect_timeout) (ssh's ConnectTimeout) or refuses SSH fails with C(preflight[ssh]: unreachable)
    and stays in the play as data (C(reached=false)), so every unreachable node is named at once."
options: {}
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    details: The lease is only checked and the fabric connection is not tried.
"""

EXAMPLES = r"""
- name: Probe every node, hold it for this run and prove the fabric
  aorta.cluster.node_prepare:
  register: aorta_prepare
  timeout: 360
"""

RETURN = r"""
facts:
  description: What the node said (see M(aorta.cluster.node_probe)), with C(connect) on a worker.
  returned: when the node answered
  type: dict
derived:
  description: C(fabric_if), C(fabric_env), C(bootstrap_ip), C(record) (the preflight line's figures, the clock
    offset) and C(pyspy).
  returned: when the node answered
  type: dict
lease:
  description: What holding the node did.
  returned: when the node answered
  type: dict
port:
  description: The rendezvous port picked on the head.
  returned: on the head, unless aorta_master_port is set
  type: int
reached:
  description:
    - Whether the node answered at all (a node never reached is not waited on again).
    - Left out of a shortened failure (RV(details)) when true, its readers' default.
  returned: always, but see above
  type: bool
own:
  description: False on a worker that passed its own checks but was not held because the head failed (it
    is not named for it).
  returned: on failure, and on such a worker
  type: bool
passed_own_checks:
  description:
    - True on such a worker (its own checks ran beside the head's and passed). Its result is not failed
      when the head's failure is known (the head's failed result stops every node; a dead head at 1000
      nodes prints one failure, not 1000), failed when the head's verdict never came.
  returned: on such a worker
  type: bool
held:
  description: False on such a worker (it took no lease for the run).
  returned: on such a worker
  type: bool
details:
  description:
    - "A failure whose console line (C(fatal: [<node>]: FAILED! => ...)) would reach 300 characters is kept whole in
      C(logs/<node>.preflight.json) of the results directory (mode 0600), named here relative to it; the result then
      holds only C(failed), C(changed), C(msg) (one line, cut to fit) and this, with C(own) and C(reached) where they
      are false. run_record reads the file back: run.json says what the whole result says. Not under check mode."
  returned: on a long failure
  type: str
  sample: logs/gpu-node-07.preflight.json
failures:
  description: Every failed check of the node, one line each (C(msg) says the first and how many more).
  returned: when the node's own checks failed
  type: list
  elements: str
"""
