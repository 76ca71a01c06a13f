enum _PlaceholderAuthGateRPC {}
