from pg_service import *  # noqa: F403
