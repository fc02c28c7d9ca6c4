"""`python -m guardrails`: the judge's command line."""

import sys

from guardrails.cli import main

sys.exit(main())
