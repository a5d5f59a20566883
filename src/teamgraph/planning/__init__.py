"""Rule-based planning: routing by word overlap, request decomposition rules and plan templates."""
