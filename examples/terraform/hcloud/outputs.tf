# The same outputs as ../local (workflow.md W3).

output "host" {
  value = hcloud_server.marquee.ipv4_address
}

output "port" {
  value = 22
}

output "user" {
  value = var.ssh_user
}

output "ssh_private_key" {
  value     = tls_private_key.ssh.private_key_openssh
  sensitive = true
}

output "free_domain" {
  value = "${var.marquee_id}.${var.base_domain}"
}

output "acme_dns" {
  value = {
    server_url  = var.acme_dns_server_url
    username    = local.acme.username
    password    = local.acme.password
    subdomain   = local.acme.subdomain
    full_domain = local.acme.fulldomain
  }
  sensitive = true
}
