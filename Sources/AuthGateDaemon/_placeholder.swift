enum _PlaceholderAuthGateDaemon {}
