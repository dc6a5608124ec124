"""What a run works on: the Subject (subject.py), the subject a run names (by_name.py: world by default) and the
geo and qa subjects. Imports nothing itself."""
