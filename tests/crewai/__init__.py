"""The CrewAI integration's tests, run in an environment of their own (scripts/test.sh): crewai
cannot share one with google-adk 2.x."""
