import sys

from agentrag.cli import main

sys.exit(main())
