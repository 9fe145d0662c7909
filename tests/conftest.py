from cosmos_service import *  # noqa: F403
from pg_service import *  # noqa: F403
