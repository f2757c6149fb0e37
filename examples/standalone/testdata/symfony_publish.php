<?php
// Publishes as a Symfony application does, with the stock Mercure
// component (Debian's php-symfony-mercure): its Hub class posts the
// Update with its own form encoding and the token in the Authorization
// header. The token is what the component's LcobucciFactory mints
// (header {"typ":"JWT","alg":"HS256"}, claims exp with microseconds and
// mercure), minted here with hash_hmac because Debian does not package
// lcobucci/jwt.
//
// Usage: php symfony_publish.php HUB_URL SECRET TOPIC DATA [ID]
// Prints the id the hub returned, or "refused STATUS WWW-Authenticate".

declare(strict_types=1);

require_once 'Symfony/Component/Mercure/autoload.php';

use Symfony\Component\Mercure\Hub;
use Symfony\Component\Mercure\Jwt\StaticTokenProvider;
use Symfony\Component\Mercure\Update;

[, $hubUrl, $secret, $topic, $data] = $argv;
$id = $argv[5] ?? null;

function b64url(string $s): string
{
    return rtrim(strtr(base64_encode($s), '+/', '-_'), '=');
}

// lcobucci/jwt's encoding: the header members in this order, dates with
// microseconds as numbers.
$header = b64url('{"typ":"JWT","alg":"HS256"}');
$claims = b64url(json_encode([
    'exp' => (float) sprintf('%.6F', microtime(true) + 3600),
    'mercure' => ['publish' => ['*'], 'subscribe' => []],
], JSON_UNESCAPED_SLASHES | JSON_PRESERVE_ZERO_FRACTION));
$jwt = "$header.$claims." . b64url(hash_hmac('sha256', "$header.$claims", $secret, true));

$hub = new Hub($hubUrl, new StaticTokenProvider($jwt));
try {
    echo $hub->publish(new Update($topic, $data, true, $id, 'book', 3000)), "\n";
} catch (\Symfony\Component\Mercure\Exception\RuntimeException $e) {
    $response = $e->getPrevious()->getResponse();
    echo 'refused ', $response->getStatusCode(), ' ', $response->getHeaders(false)['www-authenticate'][0] ?? '', "\n";
}
