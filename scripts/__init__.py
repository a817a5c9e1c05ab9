"""The checkout's commands. lab.py and gateway_schemas.py run as files (`python3 scripts/lab.py`: standard library
only, before anything is installed); one that imports the project's packages runs from the checkout's root as a
module (`python -m scripts.lesson_plans`), so that it finds them without editing sys.path."""
