"""`acagpu guard` as a feature: the scheduled reaper inside Azure.

`manage.py` installs, reports on and removes the guard job (and says why a run failed); `scope.py`
decides the subscriptions it sweeps and the one least-privilege role it holds in each. The script
the job runs is `templates/guard/acagpu_guard.py`.
"""
