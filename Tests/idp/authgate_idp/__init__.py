"""The Django project behind launch.py: django-oauth-toolkit mounted at /o/ plus a login page."""
