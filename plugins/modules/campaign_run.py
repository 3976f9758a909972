#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: campaign_run
short_description: Run the scaling ladder on the nodes of a cluster file and name the bad nodes
version_added: 0.1.0
description:
  - "From 3 nodes, first an opening run of every node (C(aorta_scaling_opening)), into
    C(<campaign dir>/opening/g0/): its fabric sweep names a slow link, its preflight a failing node."
  - "Then runs every node alone, in pairs, fours ... and last every node still in the campaign (or the
    sizes in C(aorta_scaling_sizes)); each rung's groups run at once, each an ordinary run of
    C(aorta_multinode.yml) on a cluster file of the group's own, in an C(ansible-playbook) of its own
    (C(aorta_scaling_parallel) at once), into C(<campaign dir>/k<size>/g<i>/)."
  - "The groupings follow the node order and a seed (C(aorta_scaling_seed)) so that two nodes that
    shared a group share none at the next rung; a node is named with its evidence when its groups are
    slow and its partners were not slow elsewhere, or when its group's run named it; a named node
    leaves the campaign before the next rung (C(aorta_scaling_exclude))."
  - "Writes C(campaign.json), C(junit.xml) and C(scaling.html) in the campaign's directory
    (C(aorta_results_dir), else C(aorta_results_root)/<campaign id>) and fails when the campaign's
    verdict is FAIL or it was stopped."
  - "The first Ctrl-C (or SIGTERM, or ansible-playbook gone: an AWX cancel) is handed to every running
    group as its own first Ctrl-C: each stops its nodes and records STOPPED; no further group starts,
    and the rung it interrupted is not judged."
  - "Each group's run repeats the campaign's C(-e) options, verbosity, forks, user, key, SSH arguments
    and vault options; a password prompt (C(-k), C(-K), C(--ask-vault-pass)) cannot be repeated and is
    refused."
options: {}
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    details: Says the rungs it would run and runs nothing.
"""

EXAMPLES = r"""
- name: Run the ladder
  aorta.cluster.campaign_run:
"""

RETURN = r"""
campaign_id:
  description:
    - The campaign's id (C(aorta_run_id), else made like a run's; 48 characters at most).
    - Each group's run id is C(<id>-k<size>-g<i>), the opening's C(<id>-opening-g0).
  returned: always
  type: str
  sample: 20261207T101500-a1b2c3
results_dir:
  description: The campaign's directory.
  returned: always
  type: str
verdict:
  description: C(verdict) (PASS or FAIL) and C(reasons), one per kind of trouble.
  returned: when the campaign ran
  type: dict
paths:
  description: "C(campaign), C(junit) and C(page), the files written, and C(history), the results root's index.html
    that lists the campaign (absent when it could not be updated; a warning says why)."
  returned: when the campaign ran
  type: dict
sizes:
  description: Under C(--check), the rungs' group sizes it would run.
  returned: check mode
  type: list
  elements: int
"""
