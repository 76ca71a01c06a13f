from django.contrib.auth import views as auth_views
from django.urls import include, path
from oauth2_provider import urls as dot_urls

urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    # RFC 8414's own location for the issuer https://127.0.0.1:PORT/o is
    # /.well-known/oauth-authorization-server/o at the root (DOT also serves it under /o/).
    path("", include((dot_urls.metadata_urlpatterns, "metadata"))),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]
